"""transformers' Trainer: `Trainer(..., callbacks=[StethoscopeCallback()])` records the run with a Monitor.

Per optimizer step: the loss (the model's own `outputs.loss`, summed over gradient-accumulation
micro-batches on the device), the learning rate the step used, tokens and samples counted from the
batch's `input_ids` (padding included) and a fingerprint per sample (the batch ids), step and data
time, memory. At logging steps: the Trainer's pre-clip gradient norm (`logging_steps=1` gives one per
step; the Trainer computes it anyway). Evaluations: eval loss and metrics. The Trainer's optimizer goes to
the Monitor (parameter norms, update ratios, zero-gradient fractions). The Monitor's `Control` requests
become `TrainerControl` flags (checkpoint: `should_save`; stop: save, then stop).

The run is recorded in OUTPUT_DIR/stethoscope/NAME, NAME being `run_name` or else the output folder's name:
the run's name in Prometheus labels and Parquet exports.

A critical finding (a non-finite loss, a divergence) stops training (`on_critical="stop"`, the default, as
Keras' TerminateOnNaN does; `"continue"` only records it), unless automatic recovery rolls back from it:
with `checkpoints=Checkpoints(...)` and `recovery=Recovery(...)` the Monitor restores the model, the
optimizer, the LR scheduler and the RNG in place and the Trainer goes on. A non-finite loss is seen at the
step it happens; a step whose loss was not finite is never saved (`should_save` is held).
A resumed `trainer.train(resume_from_checkpoint=…)` continues the same stethoscope run, with the
detectors' state saved in each checkpoint folder (`stethoscope_monitor.pt`).
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
from typing import Any

from stethoscope.integrations import batches
from stethoscope.integrations.critical import check_on_critical, failed_status, finite_flag, is_finite, log_stop, stop_reason
from stethoscope.integrations.runs import default_run_dir, folder_name, run_name
from stethoscope.integrations.guard import guarded
from stethoscope.records import GRAD_NORM, LR

log = logging.getLogger(__name__)

STATE_FILE = "stethoscope_monitor.pt"


class _Adapter:
    """The callback's logic; the class users get also derives from transformers' TrainerCallback."""

    def __init__(self, run_dir: str | os.PathLike[str] | None = None, on_critical: str = "stop",
                 **monitor: Any) -> None:
        """`run_dir`: where the run is recorded (default: OUTPUT_DIR/stethoscope/NAME, NAME: `run_name` or the
        output folder's name). `on_critical`: "stop" (training stops at a non-finite loss or a divergence,
        unless `recovery` rolls back from it) or "continue". Other keywords go to `stethoscope.Monitor`
        (alerts=…, export=[…], prometheus_port=…, detect=…, checkpoints=…, recovery=…)."""
        self.run_dir, self.options = run_dir, monitor
        self.on_critical = check_on_critical(on_critical)
        self.stopped: str | None = None
        """Why the callback stopped training, if it did."""
        self.monitor: Any = None
        self.errors = 0
        """Failures inside the callback (logged once, counted, never raised into training)."""
        self._hooks: list[Any] = []
        self._abandoned = -1  # the last step a rollback abandoned: its late values are not recorded
        self._reset_step()

    def _reset_step(self) -> None:
        self._loss: Any = None
        self._micro = 0
        self._finite: Any = None
        self._nonfinite = False
        self._sum_losses = False
        self._tokens = self._samples = 0
        self._ids: list[Any] = []
        self._lr: float | None = None
        self._pending: tuple[int, dict[str, Any]] | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, optimizer: Any = None,
                       lr_scheduler: Any = None, **_: Any) -> None:
        from stethoscope.capture.monitor import Monitor

        if self.monitor is not None:  # a second train() on the same Trainer: a new Monitor
            self._close("completed")
        resumed = state.global_step > 0
        name = run_name(args.run_name if args.run_name != args.output_dir else None, folder_name(args.output_dir))
        where = self.run_dir or default_run_dir(args.output_dir, name, resumed)
        optimizer = getattr(optimizer, "optimizer", optimizer)  # accelerate's wrapper: hooks go on the real one
        options = {"max_grad_norm": args.max_grad_norm or None, "config": args.to_dict(), **self.options}
        checkpoints = options.get("checkpoints")
        if checkpoints is not None and lr_scheduler is not None:  # a rollback restores the schedule too
            checkpoints.objects.setdefault("scheduler", getattr(lr_scheduler, "scheduler", lr_scheduler))
        self.stopped = None
        self.monitor = Monitor(where, model=model, optimizer=optimizer, resume=resumed, **options)
        atexit.register(self._at_exit)  # after the Monitor's own: runs before it (an exception train() raised)
        if getattr(self.monitor, "_grads", None) is not None:  # its hook sees the grads after the Trainer clipped
            self.monitor._grads.skip_global = True  # them: grad/norm is the Trainer's pre-clip norm, from its logs
        if resumed:
            self._load_state(os.path.join(args.output_dir, f"checkpoint-{state.global_step}"))
        if model is not None:
            self._hooks = [model.register_forward_pre_hook(self._on_inputs, with_kwargs=True),
                           model.register_forward_hook(self._on_outputs)]

    @guarded
    def on_train_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        self._commit()
        self._close("stopped" if control.should_training_stop and state.global_step < state.max_steps
                    else "completed")

    def _at_exit(self) -> None:
        """`train()` raised and nothing caught it: the Trainer calls no callback then, so the run is closed here with
        the exception the interpreter is exiting with (`failed: …`, what `show` and `diagnose` name), not as a run
        that merely stopped at exit."""
        exc = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
        if self.monitor is not None:
            self._close(failed_status(exc) if exc is not None else "closed at interpreter exit")

    def _close(self, status: str) -> None:
        atexit.unregister(self._at_exit)
        for h in self._hooks:
            h.remove()
        self._hooks = []
        if self.monitor is not None:
            self.monitor.close(status)
        self.monitor = None

    # -- the batch, seen by the model's forward hooks (no host sync) ---------------------------
    @guarded
    def _on_inputs(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if not module.training or self.monitor is None:
            return
        batch = dict(kwargs)
        if args:
            batch.setdefault("input_ids", args[0])
        ids = batches.token_tensor(batch)
        if ids is not None:
            tokens, samples = batches.count(ids)
            self._tokens += tokens
            self._samples += samples
            self._ids.append(batches.fingerprints(ids))
        self._sum_losses = kwargs.get("num_items_in_batch") is not None  # losses already divided by the total

    @guarded
    def _on_outputs(self, module: Any, _args: Any, output: Any) -> None:
        if not module.training or self.monitor is None:
            return
        loss = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
        if loss is not None:
            loss = loss.detach().float()
            self._loss = loss if self._loss is None else self._loss + loss
            self._finite = finite_flag(loss, self._finite)  # made now: read at the step's end without a wait
            self._micro += 1

    # -- steps ---------------------------------------------------------------------------------
    @guarded
    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, optimizer: Any = None, **kw: Any) -> None:
        opt = optimizer if optimizer is not None else kw.get("optimizer")
        if opt is not None and opt.param_groups:
            self._lr = opt.param_groups[0].get("lr")

    @guarded
    def on_step_end(self, args: Any, state: Any, control: Any, optimizer: Any = None, **_: Any) -> None:
        if self.monitor is None:
            return
        if self._commit():  # the step before rolled the run back: this one was trained on the state left behind
            self._reset_step()
            self._apply(control)
            return
        self._nonfinite = not is_finite(self._finite)
        step: dict[str, Any] = {"metrics": {}}
        if self._loss is not None:
            step["loss"] = self._loss if self._sum_losses or self._micro <= 1 else self._loss / self._micro
            if self._sum_losses and getattr(args, "average_tokens_across_devices", False) and args.world_size > 1:
                # the model divided by every rank's tokens (the count gathered across ranks): this rank's loss is
                # a 1/world_size share of its mean; the Trainer multiplies it back the same way for its own log
                step["loss"] = step["loss"] * args.world_size
        if self._lr is None and optimizer is not None and optimizer.param_groups:
            self._lr = optimizer.param_groups[0].get("lr")  # after the scheduler's step: the next step's LR
        if self._lr is not None:
            step["metrics"][LR] = self._lr
        if self._tokens:
            step["tokens"], step["samples"] = self._tokens, self._samples
        if self._ids:
            import torch

            step["batch_ids"] = self._ids[0] if len(self._ids) == 1 else torch.cat(self._ids)
        self._pending = (state.global_step, step)
        self._loss, self._micro, self._tokens, self._samples, self._ids, self._lr = None, 0, 0, 0, [], None
        self._finite = None
        if self._nonfinite:  # hand it over now, and make it visible to the detectors (and recovery) at once
            self._commit()
            self.monitor.flush()
        self._apply(control)

    @guarded
    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **_: Any) -> None:
        if self.monitor is None or not logs:
            return
        found: dict[str, float] = {}
        if isinstance(logs.get("grad_norm"), (int, float)):
            found["grad_norm"] = float(logs["grad_norm"])  # pre-clip: what clip_grad_norm_ returned
        if isinstance(logs.get("loss"), (int, float)):
            found["loss"] = float(logs["loss"])  # used only when the model's output showed no loss
        if self._pending is not None and self._pending[0] == state.global_step:
            step = self._pending[1]
            step["grad_norm"] = found.get("grad_norm")
            if step.get("loss") is None:
                step["loss"] = found.get("loss")
            self._commit()
            self._apply(control)  # before the Trainer's save of this step
        elif "grad_norm" in found and state.global_step > self._abandoned:  # not of a step rolled back from
            self.monitor.log({GRAD_NORM: found["grad_norm"]}, state.global_step)

    def _commit(self) -> bool:
        """Record the stashed step (held back until the Trainer's log of it, which has the grad norm). True
        when the Monitor rolled the run back (restored an earlier state in place) after it."""
        if self._pending is None or self.monitor is None:
            return False
        number, step = self._pending
        self._pending = None
        metrics = step.pop("metrics")
        if self.monitor.step(number, **step, **metrics).resume_step is None:
            return False
        self._abandoned = number
        return True

    @guarded
    def on_evaluate(self, args: Any, state: Any, control: Any, metrics: dict[str, Any] | None = None,
                    **_: Any) -> None:
        if self.monitor is None or not metrics:
            return
        self._commit()
        values = {f"eval/{k.removeprefix('eval_')}": float(v) for k, v in metrics.items()
                  if isinstance(v, (int, float)) and k not in ("eval_loss", "epoch")}
        loss = metrics.get("eval_loss")
        self.monitor.eval(state.global_step, eval_loss=float(loss) if isinstance(loss, (int, float)) else None,
                          **values)

    # -- checkpoints and control ---------------------------------------------------------------
    @guarded
    def on_save(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        if self.monitor is None:
            return
        self._commit()
        folder = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
        if not os.path.isdir(folder):
            return
        try:
            import torch

            torch.save(self.monitor.state_dict(), os.path.join(folder, STATE_FILE))
        except Exception as exc:  # noqa: BLE001 - a checkpoint without our state still resumes
            log.warning("stethoscope: could not save its detector state into %s (%s)", folder, exc)

    def _load_state(self, folder: str) -> None:
        path = os.path.join(folder, STATE_FILE)
        if not os.path.isfile(path):
            return
        try:
            import torch

            self.monitor.load_state_dict(torch.load(path, weights_only=True))
        except Exception as exc:  # noqa: BLE001 - the detectors warm up again instead
            log.warning("stethoscope: could not restore its detector state from %s (%s)", path, exc)

    def _apply(self, control: Any) -> None:
        """The Monitor's requests and critical findings, carried out through TrainerControl at this safe point.
        A step whose loss was not finite is never saved: the checkpoint to resume from is the one before."""
        ctl = self.monitor.control
        self._stop_if_critical(control)
        if ctl.checkpoint or ctl.stop or ctl.rollback:
            why = "; ".join(ctl.reasons) or "requested"
            if ctl.resume_step is not None:  # automatic recovery restored an earlier state in place
                log.warning("stethoscope: rolled back in place (%s); training goes on", why)
            elif ctl.rollback:
                control.should_save = control.should_training_stop = True
                log.warning("stethoscope: rollback to step %s requested (%s); the Trainer cannot roll back in "
                            "place: saving and stopping; resume from the checkpoint at or before that step",
                            ctl.rollback_to, why)
            else:
                control.should_save = True
                control.should_training_stop = control.should_training_stop or ctl.stop
                log.warning("stethoscope: %s (%s)", "saving and stopping" if ctl.stop else "saving a checkpoint", why)
            ctl.clear()
        if self._nonfinite:
            control.should_save = False

    def _stop_if_critical(self, control: Any) -> None:
        if self.on_critical != "stop" or self.stopped is not None:
            return
        why = stop_reason(self.monitor, not self._nonfinite, self.monitor.last_step)
        if why is not None:
            self.stopped = why
            control.should_training_stop = True
            log_stop(why)


def _build() -> type:
    from stethoscope.extras import require

    require("transformers", "hf", "stethoscope.integrations.hf")
    from transformers import TrainerCallback

    cls = type("StethoscopeCallback", (_Adapter, TrainerCallback), {
        "__module__": __name__, "__qualname__": "StethoscopeCallback", "__doc__": __doc__})
    return cls


def __getattr__(name: str) -> Any:
    if name != "StethoscopeCallback":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    cls = globals()["StethoscopeCallback"] = _build()
    return cls
