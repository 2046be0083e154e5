"""The Monitor: three lines in a training loop record every vital sign of the run.

The training thread does O(1) Python work per step: it stamps values and appends them to a pending
list (pending.py). Device tensors (loss, norms) cross to the host once per flush (`log_every` steps or
half the flush interval), then go to the writer thread's queue. Nothing here blocks on I/O.

The composition root: it builds the parts beside it and calls them in order. options.py: typed options;
timing.py: step time, MFU; own_work.py: saves and rollbacks after a step; run_folder.py: the folder, run.json;
observers.py: who sees the durable points, in order; wiring.py: the optional parts.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from stethoscope import records as R
from stethoscope.capture.control import Control
from stethoscope.capture.dist import rank_and_world
from stethoscope.capture.gpu import start_gpu_health
from stethoscope.capture.observers import observer_chain
from stethoscope.capture.optimizer_values import OptimizerValues
from stethoscope.capture.options import Parts, Placement, StepFacts, split_options
from stethoscope.capture.own_work import OwnWork
from stethoscope.capture.pending import Pending
from stethoscope.capture.run_folder import RunFacts, claim_run_dir
from stethoscope.capture.system import GcPauses
from stethoscope.capture.tensors import STEP_MAX, STEP_MIN, detach, int_step, length
from stethoscope.capture.timing import StepTiming
from stethoscope.capture.wiring import (alerts_config, exporters, live_alerts, live_detection, nonfinite_locator, probe,
                                        recorded_detect, recovery_policy, start_exports)
from stethoscope.config import MonitorConfig
from stethoscope.errors import InternalError
from stethoscope.record.writer import Recorder
from stethoscope.store.db import RunStore, rank_path
from stethoscope.store.schema import RESUME_KEY

log = logging.getLogger(__name__)
_PLAIN_NUMBERS = frozenset((float, int))  # values `log` hands to the writer as they are (no tensor to detach)
_LR_KEYS = frozenset(("lr", "learning_rate"))  # `step(..., lr=sched.get_last_lr()[0])`: the LR the step used


class Monitor:
    """Records a training run into `run_dir` (one SQLite file per rank).

    Pass the model and optimizer to capture gradient/parameter norms, LR and data-wait time without
    further code; `tokens_per_step` (this rank's tokens per optimizer step) enables tokens/s and MFU.
    `config` is your training config, stored as run metadata. A `run_dir` that already holds a run is
    continued only with `resume=True`; otherwise this run is recorded beside it in `run_dir-2`
    (`mon.run_dir` says where). Options of `MonitorConfig` may be given as keywords (`flush_interval=0.5`,
    `grad_norms="layers"`, `detect=DetectConfig(...)`, …) or as `settings=`. The rest (`checkpoints`,
    `recovery`, `debug_nonfinite`, `export`, `prometheus_port`, `max_grad_norm`, `scaler`, `rank`, `store`, …)
    are plain keywords too, or typed objects: `facts=StepFacts(...)`, `parts=Parts(...)`,
    `placement=Placement(...)` (see `stethoscope.capture.options`).
    """

    def __init__(self, run_dir: str | os.PathLike[str], model: Any = None, optimizer: Any = None, *,
                 tokens_per_step: int | None = None, config: Any = None, resume: bool = False,
                 settings: MonitorConfig | None = None, facts: StepFacts | None = None, parts: Parts | None = None,
                 placement: Placement | None = None, **options: Any) -> None:
        facts, parts, placement, options = split_options(options, facts, parts, placement)
        for name, obj, needs in (("model", model, "parameters"), ("optimizer", optimizer, "param_groups")):
            if obj is not None and not hasattr(obj, needs):  # a config error: fails here, as bad settings do
                raise TypeError(f"Monitor({name}=...) expects a torch {'nn.Module' if name == 'model' else 'optimizer'}"
                                f" (with .{needs}), got {type(obj).__name__}")
        self.settings = settings or MonitorConfig(**options)
        self.run_dir = Path(run_dir)
        self.control = Control()
        self.errors = 0
        self._closed = False
        auto_rank, auto_world = rank_and_world()
        self.rank = auto_rank if placement.rank is None else placement.rank
        self.world_size = auto_world if placement.world_size is None else placement.world_size
        self.last_step: int | None = None
        self.steps = 0
        self.checkpoints = parts.checkpoints
        """The `stethoscope.Checkpoints` this Monitor saves after steps and resumes from, or None."""

        detection = live_detection(self.settings.detect)  # before the writer starts: a bad config leaves no thread
        self.recovery = recovery_policy(parts.recovery, detection, parts.checkpoints)
        """The automatic recovery policy's state (`stethoscope.Recovery`): rollbacks, skips, `lr_scale`; or None."""
        alerts = alerts_config(self.settings.alerts, detection)  # a bad alerts file fails here, naming the key
        self._nonfinite = nonfinite_locator(parts.debug_nonfinite, model, facts.scaler, self._write_events)
        export = exporters(parts.export, parts.prometheus_port)  # a misspelt exporter or a missing package: here
        if placement.store is None:
            self.run_dir = claim_run_dir(self.run_dir, self.rank, resume)
        store = placement.store if placement.store is not None else RunStore(rank_path(self.run_dir, self.rank))
        self._recorder = Recorder(store, self.settings.flush_interval, self.settings.max_queue, self.settings.strict)
        self._pending = Pending(self._recorder, self.settings, facts.max_grad_norm, facts.scaler,
                                placement.device_memory, self._nonfinite, self._values)
        self._run_facts = RunFacts(self.run_dir, self.rank, self.world_size, config, self._recorder,
                                   lambda exc, what: self._fail(exc, what, always_log=True))
        self._resumed = "resume_time" in self._run_facts.info  # its first step is recorded (`_resume_event`)
        self._detection = detection
        self._recorder.call("set_meta", recorded_detect(detection))  # the views replay the run with these
        self._observe(model, detection, alerts, export)
        self._gc = GcPauses()
        self._gpu = self._start("the GPU health sampler", lambda: start_gpu_health(
            self.settings.gpu_health, self._recorder.put_many, lambda: self.last_step, self.settings.system_every))
        if self._probe is not None:
            self._probe.gpu = self._gpu  # a straggler's health vector says whether its GPU throttles
        self._optim = OptimizerValues(self.settings, model, optimizer)
        self._grads = self._optim.grads  # the HF callback turns its global norm off (the Trainer logs its own)
        self._timing = StepTiming(model, tokens_per_step, facts.samples_per_step, facts.seq_len, facts.peak_flops)
        self._own = OwnWork(self.checkpoints, self.recovery, self._probe, self._timing) \
            if self.checkpoints is not None or self.recovery is not None else None
        if self.checkpoints is not None:
            self.checkpoints.attach(self, model, optimizer, facts.scaler, self._checkpoint_event)
        self._exc_before = _exiting_with()  # an exception already shown (a REPL, a notebook) is not this run's end
        atexit.register(self._atexit)

    # -- setup ---------------------------------------------------------------------------------
    def _observe(self, model: Any, detection: Any, alerts: Any, export: Any) -> None:
        """The writer thread's side: the probe, the alert rules, recovery and the exporters, in one chain."""
        self._probe = self._start("the probe server", lambda: probe(  # the probe server, hang watchdog, cross-rank health
            self.settings, self, self.run_dir, self.rank, self.world_size, self._recorder, model))
        self._alerts = live_alerts(alerts, self._recorder, self.rank, self.run_dir, self.settings.strict)
        if self.recovery is not None:
            self.recovery.bind(self)
        self.exports = start_exports(self._recorder, export, self.run_dir, self.rank, self.world_size,
                                     self._run_facts.info.get("config"))
        chain = observer_chain(detection, self.control, probe=self._probe, alerts=self._alerts,
                               recovery=self.recovery, exports=self.exports)
        if chain is not None:
            self._recorder.observers.append(chain)
        if getattr(self.exports, "prometheus_url", None):  # where to scrape, beside the run's other facts
            self._run_facts.add(prometheus_url=self.exports.prometheus_url)

    def _start(self, what: str, start: Callable[[], Any]) -> Any:
        """An optional part that may fail to start (a port in use, a bad driver): the run goes on without it."""
        try:
            return start()
        except Exception as exc:  # noqa: BLE001
            self._fail(exc, f"starting {what}", always_log=True)
            return None

    # -- the training loop's calls -------------------------------------------------------------
    def step(self, step: int, loss: Any = None, *, grad_norm: Any = None, batch_ids: Any = None,
             tokens: int | None = None, samples: int | None = None, batch: Any = None, **metrics: Any) -> Control:
        """Record one optimizer step. Cheap: no host sync, no I/O. Returns the Control to act on.
        `batch` (or a callable rebuilding it) is used only with `debug_nonfinite`, and held until the next flush."""
        try:
            if type(step) is not int or not STEP_MIN <= step <= STEP_MAX:
                step = int_step(step)
            if self._nonfinite is not None:
                self._nonfinite.note(step, batch)
            if self._resumed:
                self._resume_event(step)
            self._step(step, loss, grad_norm, batch_ids, tokens, samples, metrics)
            if self._probe is not None:
                self._probe.on_step(step)
            if self._own is not None:
                self._own.after_step(step, metrics, self.control, loss)
        except Exception as exc:  # noqa: BLE001 - never crash the run
            self._fail(exc)
        return self.control

    def should_skip(self, step: int) -> bool:
        """Whether the loop should skip the batch of `step` (automatic recovery skips the batches of an
        incident after rolling back): draw it and drop it, do not train on it. Never raises."""
        try:
            return self.recovery is not None and self.recovery.should_skip(step)
        except Exception as exc:  # noqa: BLE001
            self._fail(exc, "checking batches to skip")
            return False

    def resume(self) -> int:
        """Restore the newest verified checkpoint (model, optimizer, scheduler, RNG, data position, this
        Monitor's detector and alert state); the step to continue from (its step + 1), or 0."""
        if self.checkpoints is None:
            return 0
        try:
            step = self.checkpoints.restore()
        except Exception as exc:  # noqa: BLE001 - a resume that fails starts from scratch, loudly
            self._fail(exc, "resuming from a checkpoint", always_log=True)
            return 0
        return 0 if step is None else step + 1

    def state_dict(self) -> dict[str, Any]:
        """The live detectors' and alert rules' state, saved with each checkpoint (flushes first)."""
        self.flush()
        return {key: part.state_dict() if part is not None else None for key, part in self._stateful().items()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.flush()
        for key, part in self._stateful().items():
            if part is not None and state.get(key) is not None:
                part.load_state_dict(state[key])

    def _stateful(self) -> dict[str, Any]:
        return {"detection": self._detection, "alerts": self._alerts, "recovery": self.recovery}

    def _resume_event(self, step: int) -> None:
        """The first step of a resumed session, as an event of its own: every resume of the run is found (the run
        table keeps only the newest `resume_time`); a `lifecycle` event, in no SQL view of findings."""
        self._resumed = False
        when = self._run_facts.info.get("resume_time")
        self._write_events([(step, time.time(), "lifecycle", "info", "monitor",
                             f"resumed: this session's first step is {step}", {RESUME_KEY: step, "resume_time": when})])

    def _write_events(self, events: Any) -> None:
        self._recorder.call("write_events", events)

    def _checkpoint_event(self, step: int | None, kind: str, severity: str, message: str, data: dict[str, Any]) -> None:
        self._recorder.call("write_events", [(step, time.time(), kind, severity, "checkpoint", message, data)])

    def eval(self, step: int, eval_loss: Any = None, **metrics: Any) -> None:
        """Record evaluation results at `step` (eval_loss → eval/loss, other keys → eval/<key>)."""
        values = {f"eval/{k}" if "/" not in k else k: v for k, v in metrics.items()}
        if eval_loss is not None:
            values[R.EVAL_LOSS] = eval_loss
        if self.checkpoints is not None:
            self.checkpoints.note(values)
        self.log(values, step)

    def log(self, values: Mapping[str, Any], step: int | None = None) -> None:
        """Record arbitrary named values (floats or tensors) at `step` (default: the last step)."""
        try:
            step = (self.last_step or 0) if step is None else step
            if _PLAIN_NUMBERS.issuperset(map(type, values.values())):  # in C: half the cost of a generator
                self._recorder.put_many(values, step, time.time())
            else:
                self._pending.add(step, {k: detach(v) for k, v in values.items()})
                self._pending.flush(self.last_step)
        except Exception as exc:  # noqa: BLE001
            self._fail(exc)

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Make everything recorded so far durable in the store (blocks up to `timeout` seconds)."""
        try:
            self._pending.flush(self.last_step)
        except Exception as exc:  # noqa: BLE001
            self._fail(exc)
        return self._recorder.flush(timeout)

    @property
    def internal_errors(self) -> int:
        """Failures inside stethoscope so far (training thread and writer), as in `stethoscope/internal_errors`."""
        return self.errors + self._recorder.errors

    def close(self, status: str = "completed") -> None:
        """Flush, stamp the end of the run and stop the writer. Idempotent; never raises (unless strict)."""
        if getattr(self, "_closed", True):
            return
        self._closed = True
        atexit.unregister(self._atexit)
        try:
            if self._alerts is not None:
                self._alerts.run_ended(status)  # the last message of an open incident says how the run ended
            self._pending.flush(self.last_step)
            self._run_facts.add(status=status, end_time=time.time(), steps=self.steps, last_step=self.last_step,
                                dropped_points=self._recorder.queue.dropped, internal_errors=self.internal_errors)
        except Exception as exc:  # noqa: BLE001 - never crash the run, not even on its way out
            self._fail(exc, "closing the run")
        finally:
            if self.checkpoints is not None:
                self.checkpoints.close()
            self._finish()

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, exc_type: Any, exc: Any, _tb: Any) -> None:
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):  # Ctrl-C: stopped, not broken
            self.close("interrupted (KeyboardInterrupt)")
        else:
            self.close("completed" if exc_type is None else f"failed: {exc_type.__name__}: {exc}")

    # -- internals -----------------------------------------------------------------------------
    def _step(self, step: int, loss: Any, grad_norm: Any, batch_ids: Any, tokens: int | None,
              samples: int | None, metrics: dict[str, Any]) -> None:
        # The step's facts as they are now (tensors detached, not read), in one tuple; its values are laid out
        # at the flush (`_values`), once per log_every steps with warm caches, not in the trainer's step
        now = time.perf_counter()
        timing = self._timing
        if metrics and not _LR_KEYS.isdisjoint(metrics):  # the LR, named as people name it: opt/lr, charted as the LR
            metrics = {R.LR if k in _LR_KEYS else k: v for k, v in metrics.items()}
        facts = ({k: detach(v) for k, v in metrics.items()} if metrics else None,
                 None if loss is None else detach(loss), self._optim.take(grad_norm, metrics),
                 now, timing.last_call, timing.compute_start, tokens,
                 samples if samples is not None else length(batch_ids),
                 self._own.take() if self._own is not None else 0.0, self._gc.take())
        pending = self._pending
        pending.add(step, facts, batch_ids)
        self.last_step, self.steps = step, self.steps + 1
        if pending.due(now):
            pending.flush(step)
        timing.restart()

    def _values(self, facts: tuple[Any, ...]) -> dict[str, Any]:
        """A step's values from the facts `_step` kept, named and in the order they are recorded."""
        metrics, loss, optim, now, last_call, compute_start, tokens, samples, spent, gc_pause = facts
        values: dict[str, Any] = metrics if metrics is not None else {}
        if loss is not None:
            values[R.LOSS] = loss
        self._optim.put(values, optim)
        self._timing.capture(values, now, last_call, compute_start, tokens, samples)
        if spent:
            values[R.CHECKPOINT_TIME] = spent
        values[R.GC_PAUSE] = gc_pause
        return values

    def _finish(self) -> None:
        """Remove the hooks and stop the writer; each part runs even when an earlier one failed."""
        try:
            if getattr(self, "_probe", None) is not None:
                self._probe.detach(self)  # before the writer stops: a hang resolved at the end is recorded
            if getattr(self, "_gpu", None) is not None:
                self._gpu.close()  # its last sample reaches the writer before the writer stops
            for obj in (self._optim, self._gc, self._timing):
                if obj is not None:
                    obj.remove()
        except Exception as exc:  # noqa: BLE001
            self._fail(exc, "removing the hooks")
        finally:
            self._recorder.close()

    def _fail(self, exc: Exception, what: str = "recording a step", always_log: bool = False) -> None:
        self.errors += 1
        self._recorder.other_errors = self.errors  # the writer reports the total as stethoscope/internal_errors
        if self.errors == 1 or always_log:
            log.warning("stethoscope failed %s: %s; the run goes on (further failures are only counted, in "
                        "stethoscope/internal_errors)", what, exc, exc_info=exc if self.errors == 1 else None)
        if self.settings.strict:
            raise InternalError(f"stethoscope failed {what}: {exc!r}") from exc

    def _atexit(self) -> None:
        """A run the script never closed: it died of the uncaught exception the interpreter is exiting with
        (`failed: …`, as `__exit__` writes it: `show` and `diagnose` name the crash; Ctrl-C: `interrupted`), or
        the script ended without `close()` (`closed at interpreter exit`)."""
        exc = _exiting_with()
        if exc is None or exc is self._exc_before:
            status = "closed at interpreter exit"
        elif isinstance(exc, KeyboardInterrupt):
            status = "interrupted (KeyboardInterrupt)"
        else:
            status = f"failed: {type(exc).__name__}: {exc}"
        try:
            self.close(status)
        except Exception:  # noqa: BLE001 - strict re-raised; a traceback at exit helps no one
            log.warning("stethoscope failed closing the run at interpreter exit", exc_info=True)


def _exiting_with() -> BaseException | None:
    """The uncaught exception the interpreter printed last (set before the atexit handlers run)."""
    return getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
