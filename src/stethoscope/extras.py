"""Optional frameworks and tools, imported when first used; an absent one is one line naming the extra."""

from __future__ import annotations

import importlib
from types import ModuleType

from stethoscope.errors import UsageError


class MissingExtra(UsageError, ImportError):
    """An optional package stethoscope needs for this feature is not installed."""


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import `module`, or raise MissingExtra: "<what> needs <package>: pip install 'stethoscope[<extra>]'"."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        package = module.split(".")[0].replace("_", "-")
        raise MissingExtra(f"{what} needs {package}, which is not installed ({exc}): "
                           f"pip install 'stethoscope[{extra}]'") from None
