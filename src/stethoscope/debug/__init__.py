"""Tools for the moment something broke, run on the user's own model and data (torch imported lazily).

`locate_nonfinite(model, batch)`: where a NaN/Inf is born. `gradients(model)`: per-layer gradient
norms, zero/vanishing/exploding layers, dead units. `numerics(model, sample)`: non-finite or extreme
parameters, saturated activations, norm eps too small for the dtype. `workflow(finding, context)`:
the guided checks for a loss spike, a divergence or a NaN, each run on the given model and batch;
`stethoscope.debug.stored.stored_workflow(finding, run)` runs those a run's store answers without the
model (what `stethoscope debug RUN` prints).
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "GradientConfig": "stethoscope.debug.grads",
    "GradientReport": "stethoscope.debug.grads",
    "NonfiniteReport": "stethoscope.debug.nonfinite",
    "NonfiniteWatch": "stethoscope.debug.watch",
    "NumericsConfig": "stethoscope.debug.numeric",
    "NumericsReport": "stethoscope.debug.numeric",
    "Workflow": "stethoscope.debug.workflows",
    "WorkflowContext": "stethoscope.debug.workflows",
    "gradients": "stethoscope.debug.grads",
    "locate_nonfinite": "stethoscope.debug.nonfinite",
    "numerics": "stethoscope.debug.numeric",
    "workflow": "stethoscope.debug.workflows",
}

__all__ = [
    "GradientConfig",
    "GradientReport",
    "NonfiniteReport",
    "NonfiniteWatch",
    "NumericsConfig",
    "NumericsReport",
    "Workflow",
    "WorkflowContext",
    "gradients",
    "locate_nonfinite",
    "numerics",
    "workflow",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'stethoscope.debug' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
