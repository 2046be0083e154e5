"""stethoscope: keeps watch over deep-learning training runs.

Importing this package loads no torch, starts no thread and no server; the heavy parts are
imported when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "Checkpoints",
    "Control",
    "Finding",
    "Monitor",
    "MonitorConfig",
    "Recovery",
    "__version__",
    "open_run",
]

if TYPE_CHECKING:
    from stethoscope.capture.control import Control
    from stethoscope.capture.monitor import Monitor
    from stethoscope.checkpoint import Checkpoints
    from stethoscope.act.recovery import Recovery
    from stethoscope.config import MonitorConfig
    from stethoscope.records import Finding
    from stethoscope.store.query import open_run

_LAZY = {
    "Checkpoints": "stethoscope.checkpoint",
    "Control": "stethoscope.capture.control",
    "Monitor": "stethoscope.capture.monitor",
    "MonitorConfig": "stethoscope.config",
    "Finding": "stethoscope.records",
    "Recovery": "stethoscope.act.recovery",
    "open_run": "stethoscope.store.query",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'stethoscope' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
