"""What a step's optimizer update saw: gradient norms (fused, from an optimizer pre-hook) and the LR."""

from __future__ import annotations

from typing import Any

from stethoscope import records as R
from stethoscope.capture.tensors import detach
from stethoscope.capture.wiring import grad_stats, lr_used
from stethoscope.config import MonitorConfig


class OptimizerValues:
    """The grad norms and LRs of each step, taken from the optimizer's hooks (torch imported only there)."""

    def __init__(self, settings: MonitorConfig, model: Any, optimizer: Any) -> None:
        self.optimizer = optimizer
        self.grads = grad_stats(settings, model, optimizer)
        self.lr_used = lr_used(optimizer)
        self._user_grad_norm = False

    def capture(self, values: dict[str, Any], grad_norm: Any) -> None:
        """This step's grad norms and LR into `values` (device tensors, not read)."""
        grads = self.grads
        if grads is not None:
            grads.take_into(values)
        if grad_norm is not None:
            if not self._user_grad_norm and grads is not None:
                grads.skip_global = True  # reuse the user's clip_grad_norm_ result from now on
            self._user_grad_norm = True
            values[R.GRAD_NORM] = detach(grad_norm)
        self._lr(values)

    def _lr(self, values: dict[str, Any]) -> None:
        lr_used = self.lr_used
        if self.optimizer is None or R.LR in values:  # an LR the caller passed (the one the step used) wins
            if lr_used is not None:
                lr_used.take_into(None)
            return
        if lr_used is not None and lr_used.take_into(values):  # what optimizer.step() used since the last call
            return
        for i, group in enumerate(self.optimizer.param_groups):
            lr = group.get("lr")
            if lr is not None:
                values[R.LR if i == 0 else f"{R.LR}/group{i}"] = detach(lr)

    def remove(self) -> None:
        for hook in (self.grads, self.lr_used):
            if hook is not None:
                hook.remove()
