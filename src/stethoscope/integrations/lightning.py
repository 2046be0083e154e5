"""Lightning: `L.Trainer(..., callbacks=[StethoscopeCallback()])` records the run with a Monitor.

Per optimizer step: the loss `training_step` returned (averaged over accumulated batches on the
device), the gradient norm before clipping (`on_before_optimizer_step`: after AMP unscaling, before
Lightning clips), LR and parameter/update statistics from the Monitor's optimizer hooks, tokens and
samples counted from the batch (`input_ids` of a dict, or the first integer [batch, seq] tensor) with a
fingerprint per sample as batch ids, step and data time, memory. Validation: `val_loss` (or
`val/loss`) as the eval loss. The Monitor's `Control` requests are carried out by the Trainer:
checkpoint → `trainer.save_checkpoint`, stop → `trainer.should_stop`.

The run is recorded in DEFAULT_ROOT_DIR/stethoscope/NAME, NAME being the logger's version (`version_3`,
after the logger's name when it has its own) or else the root folder's name: the run's name in Prometheus
labels and Parquet exports.

A critical finding (a non-finite loss, a divergence) stops training (`on_critical="stop"`, the default, as
`EarlyStopping(check_finite=True)` does; `"continue"` only records it), unless automatic recovery rolls
back from it: with `checkpoints=Checkpoints(...)` and `recovery=Recovery(...)` the Monitor restores the
module, the optimizer, the LR scheduler and the RNG in place and the Trainer goes on. A non-finite loss is
seen at the step it happens (not at the next flush), and a state whose loss was not finite is never saved
by the callback. Resuming with `fit(ckpt_path=…)` continues the same stethoscope run, the detectors' state
restored from the checkpoint (the callback's `state_dict`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from typing import Any

from stethoscope.integrations import batches
from stethoscope.integrations.critical import check_on_critical, finite_flag, is_finite, log_stop, stop_reason
from stethoscope.integrations.runs import default_run_dir, folder_name, run_name
from stethoscope.integrations.guard import guarded
from stethoscope.records import LR

log = logging.getLogger(__name__)

EVAL_KEYS = ("val_loss", "val/loss", "validation_loss", "eval_loss")


class _Adapter:
    """The callback's logic; the class users get also derives from Lightning's Callback."""

    def __init__(self, run_dir: str | os.PathLike[str] | None = None, on_critical: str = "stop",
                 **monitor: Any) -> None:
        """`run_dir`: where the run is recorded (default: DEFAULT_ROOT_DIR/stethoscope/NAME, NAME: the logger's
        version or the root folder's name). `on_critical`: "stop" (training stops at a non-finite loss or a
        divergence, unless `recovery` rolls back from it) or "continue". Other keywords go to
        `stethoscope.Monitor` (alerts=…, export=[…], prometheus_port=…, tokens_per_step=…, checkpoints=…,
        recovery=…)."""
        self.run_dir, self.options = run_dir, monitor
        self.on_critical = check_on_critical(on_critical)
        self.stopped: str | None = None
        """Why the callback stopped training, if it did."""
        self._stop_time = 0.0
        self.monitor: Any = None
        self.errors = 0
        """Failures inside the callback (logged once, counted, never raised into training)."""
        self._restored: dict[str, Any] | None = None
        self._clear()

    def _clear(self) -> None:
        self._loss: Any = None
        self._batches = self._tokens = self._samples = 0
        self._ids: list[Any] = []
        self._grad_norm: Any = None
        self._lrs: dict[str, float] = {}
        self._finite: Any = None

    # -- lifecycle -----------------------------------------------------------------------------
    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        from stethoscope.capture.monitor import Monitor

        resumed = trainer.ckpt_path is not None or trainer.global_step > 0
        name = (self._restored or {}).get("run_name") or _run_name(trainer)  # a resume continues its run
        where = self.run_dir or default_run_dir(trainer.default_root_dir, name, resumed)
        optimizer = trainer.optimizers[0] if trainer.optimizers else None
        clip = trainer.gradient_clip_val if trainer.gradient_clip_algorithm in (None, "norm") else None
        options = {"max_grad_norm": clip or None, "config": _hparams(pl_module), **self.options}
        checkpoints = options.get("checkpoints")
        if checkpoints is not None and trainer.lr_scheduler_configs:  # a rollback restores the schedule too
            checkpoints.objects.setdefault("scheduler", trainer.lr_scheduler_configs[0].scheduler)
        self.stopped = None
        self.monitor = Monitor(where, model=pl_module, optimizer=optimizer, resume=resumed, **options)
        if self._restored is not None:
            self.monitor.load_state_dict(self._restored)
            self._restored = None
        self._last_step = trainer.global_step

    @guarded
    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self._close("stopped" if trainer.should_stop else "completed")
        if self.stopped is not None:
            self._name_saves_after_the_stop(trainer)

    def _name_saves_after_the_stop(self, trainer: Any) -> None:
        """Lightning runs one more validation (or the epoch's end) when training stops, and its ModelCheckpoint
        saves there: the state of the step we stopped at (NaN weights after a non-finite loss), with
        `save_top_k=1` in place of the last good one. Name those files so nobody resumes from them."""
        saved = set()
        for cb in getattr(trainer, "checkpoint_callbacks", None) or []:
            paths = [getattr(cb, "best_model_path", ""), getattr(cb, "last_model_path", ""),
                     *(getattr(cb, "best_k_models", None) or {})]
            saved |= {str(p) for p in paths if p and os.path.isfile(p) and os.path.getmtime(p) >= self._stop_time}
        if saved:
            log.warning("stethoscope: Lightning's ModelCheckpoint saved %s after training stopped (%s): it holds "
                        "the state of that step; do not resume from it, resume from a checkpoint saved before "
                        "(ModelCheckpoint(monitor=\"val_loss\") never ranks a NaN eval loss as best)",
                        ", ".join(sorted(saved)), self.stopped)

    @guarded
    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self._close(f"failed: {type(exception).__name__}: {exception}")

    def _close(self, status: str) -> None:
        if self.monitor is not None:
            self.monitor.close(status)
        self.monitor = None

    # -- steps ---------------------------------------------------------------------------------
    @guarded
    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.monitor is None:
            return
        loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
        if loss is not None and hasattr(loss, "detach"):
            loss = loss.detach().float()
            self._loss = loss if self._loss is None else self._loss + loss
        self._batches += 1
        ids = batches.token_tensor(batch)
        if ids is not None:
            tokens, samples = batches.count(ids)
            self._tokens, self._samples = self._tokens + tokens, self._samples + samples
            self._ids.append(batches.fingerprints(ids))
        if trainer.global_step == self._last_step:  # accumulating: the optimizer has not stepped yet
            return
        self._last_step = trainer.global_step
        self._record(trainer)

    def _record(self, trainer: Any) -> None:
        loss = self._loss / self._batches if self._loss is not None and self._batches > 1 else self._loss
        ids = None
        if self._ids:
            import torch

            ids = self._ids[0] if len(self._ids) == 1 else torch.cat(self._ids)
        finite = is_finite(self._finite)
        ctl = self.monitor.step(trainer.global_step, loss=loss, grad_norm=self._grad_norm, batch_ids=ids,
                                tokens=self._tokens or None, samples=self._samples or None, **self._lrs)
        self._clear()
        if not finite:  # make it visible to the detectors (and recovery) now, not at the next flush
            self.monitor.flush()
        self._apply(ctl, trainer, finite)

    @guarded
    def on_before_backward(self, trainer: Any, pl_module: Any, loss: Any) -> None:
        if self.monitor is not None and hasattr(loss, "detach"):
            self._finite = finite_flag(loss, self._finite)  # made now: read at the step's end without a wait

    @guarded
    def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        if self.monitor is None:
            return
        import torch

        grads = [p.grad for p in pl_module.parameters() if p.grad is not None]
        if grads:  # on the device, no sync; before Lightning clips (and after AMP unscaled)
            self._grad_norm = torch.nn.utils.get_total_norm(grads)
        # The LR this step uses: by on_train_batch_end a per-step scheduler has already moved it on.
        self._lrs = {LR if i == 0 else f"{LR}/group{i}": g["lr"] for i, g in enumerate(optimizer.param_groups)
                     if isinstance(g.get("lr"), (int, float))}

    @guarded
    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if self.monitor is None or trainer.sanity_checking:
            return
        metrics = trainer.callback_metrics
        key = next((k for k in EVAL_KEYS if k in metrics), None)
        others = {f"eval/{k.removeprefix('val_').removeprefix('val/')}": v for k, v in metrics.items()
                  if k.startswith(("val_", "val/")) and k != key}
        self.monitor.eval(trainer.global_step, eval_loss=metrics[key] if key else None, **others)

    # -- checkpoints and control ---------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        if self.monitor is None:
            return {}
        return {"run_name": self.monitor.run_dir.name, **self.monitor.state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if state_dict:
            self._restored = state_dict  # restored before training starts: applied to the Monitor then

    def _apply(self, ctl: Any, trainer: Any, finite: bool = True) -> None:
        """The Monitor's requests and critical findings, carried out by the Trainer at this safe point (after a
        step). A state whose loss was not finite is never saved: the checkpoint to resume from is the one before."""
        self._stop_if_critical(trainer, finite)
        if not (ctl.checkpoint or ctl.stop or ctl.rollback):
            return
        why = "; ".join(ctl.reasons) or "requested"
        path = os.path.join(_checkpoint_dir(trainer), f"stethoscope-step={trainer.global_step}.ckpt")
        if ctl.resume_step is not None:  # automatic recovery restored an earlier state in place
            log.warning("stethoscope: rolled back in place (%s); training goes on", why)
            ctl.clear()
            return
        if ctl.rollback:
            log.warning("stethoscope: rollback to step %s requested (%s); Lightning cannot roll back in place: "
                        "saving and stopping; resume with fit(ckpt_path=...) from a checkpoint at or before that "
                        "step", ctl.rollback_to, why)
        else:
            log.warning("stethoscope: %s (%s): %s", "saving and stopping" if ctl.stop else "saving a checkpoint",
                        why, path if finite else "not saved: the loss of this step is not finite")
        stop = ctl.stop or ctl.rollback
        ctl.clear()
        if finite:
            trainer.save_checkpoint(path)
        if stop:
            trainer.should_stop = True

    def _stop_if_critical(self, trainer: Any, finite: bool) -> None:
        if self.on_critical != "stop" or self.stopped is not None:
            return
        why = stop_reason(self.monitor, finite, trainer.global_step)
        if why is not None:
            self.stopped, self._stop_time = why, time.time()
            trainer.should_stop = True
            log_stop(why)


def _run_name(trainer: Any) -> str:
    """The logger's version (after its name, when it has its own), else the root folder's name."""
    logger = trainer.logger
    version = getattr(logger, "version", None) if logger is not None else None
    if version is None or version == "":
        return run_name(folder_name(trainer.default_root_dir))
    version = f"version_{version}" if isinstance(version, int) else str(version)
    prefix = getattr(logger, "name", None)
    return run_name(f"{prefix}-{version}" if prefix and prefix != "lightning_logs" else version)


def _checkpoint_dir(trainer: Any) -> str:
    callback = trainer.checkpoint_callback
    if callback is not None and getattr(callback, "dirpath", None):
        return str(callback.dirpath)
    return os.path.join(trainer.default_root_dir, "checkpoints")


def _hparams(pl_module: Any) -> dict[str, Any]:
    try:
        return dict(pl_module.hparams)
    except Exception:  # noqa: BLE001 - a module without hparams
        return {}


def _callback_base() -> type:
    from stethoscope.extras import MissingExtra, require

    try:
        return require("lightning.pytorch", "lightning", "stethoscope.integrations.lightning").Callback
    except MissingExtra as missing:
        try:
            return require("pytorch_lightning", "lightning", "stethoscope.integrations.lightning").Callback
        except MissingExtra:
            raise missing from None


def __getattr__(name: str) -> Any:
    if name != "StethoscopeCallback":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    cls = type("StethoscopeCallback", (_Adapter, _callback_base()), {
        "__module__": __name__, "__qualname__": "StethoscopeCallback", "__doc__": __doc__})
    globals()["StethoscopeCallback"] = cls
    return cls
