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

    def take(self, grad_norm: Any, metrics: dict[str, Any]) -> tuple[Any, Any, Any]:
        """This step's grad norms and LRs as the hooks left them (device tensors, not read), for `put` later."""
        grads = self.grads
        hooked = grads.take() if grads is not None else None
        if grad_norm is not None:
            if not self._user_grad_norm and grads is not None:
                grads.skip_global = True  # reuse the user's clip_grad_norm_ result from now on
            self._user_grad_norm = True
            grad_norm = detach(grad_norm)
        return hooked, grad_norm, self._lr(metrics)

    @staticmethod
    def put(values: dict[str, Any], taken: tuple[Any, Any, Any]) -> None:
        """What `take` returned into `values`: the hooks' values, the caller's grad norm over theirs, the LRs."""
        hooked, grad_norm, lrs = taken
        if hooked:
            values.update(hooked)
        if grad_norm is not None:
            values[R.GRAD_NORM] = grad_norm
        if lrs:
            values.update(lrs)

    def _lr(self, metrics: dict[str, Any]) -> dict[str, Any] | None:
        used = self.lr_used.take() if self.lr_used is not None else None
        if self.optimizer is None or R.LR in metrics:  # an LR the caller passed (the one the step used) wins
            return None
        if used:  # what optimizer.step() used since the last call
            return used
        return {R.LR if i == 0 else f"{R.LR}/group{i}": detach(group["lr"])  # no hook: the groups' LR now
                for i, group in enumerate(self.optimizer.param_groups) if group.get("lr") is not None}

    def remove(self) -> None:
        for hook in (self.grads, self.lr_used):
            if hook is not None:
                hook.remove()
