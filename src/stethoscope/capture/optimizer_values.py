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
        self._grad_norms(values, grad_norm)
        self._lr(values)

    def _grad_norms(self, values: dict[str, Any], grad_norm: Any) -> None:
        hooked = self.grads.take() if self.grads is not None else {}
        if grad_norm is not None:
            if not self._user_grad_norm and self.grads is not None:
                self.grads.skip_global = True  # reuse the user's clip_grad_norm_ result from now on
            self._user_grad_norm = True
            hooked[R.GRAD_NORM] = detach(grad_norm)
        values.update(hooked)

    def _lr(self, values: dict[str, Any]) -> None:
        used = self.lr_used.take() if self.lr_used is not None else {}
        if self.optimizer is None or R.LR in values:  # an LR the caller passed (the one the step used) wins
            return
        if used:  # what optimizer.step() used since the last call
            values.update(used)
            return
        for i, group in enumerate(self.optimizer.param_groups):
            lr = group.get("lr")
            if lr is not None:
                values[R.LR if i == 0 else f"{R.LR}/group{i}"] = detach(lr)

    def remove(self) -> None:
        for hook in (self.grads, self.lr_used):
            if hook is not None:
                hook.remove()
