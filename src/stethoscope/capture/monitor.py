"""The Monitor: three lines in a training loop record every vital sign of the run.

The training thread does O(1) Python work per step: it stamps values and appends them to a pending
list. Device tensors (loss, norms) cross to the host once per flush (`log_every` steps or half the
flush interval), then go to the writer thread's queue. Nothing here blocks on I/O.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stethoscope import records as R
from stethoscope.capture.control import Control
from stethoscope.capture.dist import rank_and_world
from stethoscope.capture.gpu import start_gpu_health
from stethoscope.capture.observers import observer_chain
from stethoscope.capture.runinfo import start_info
from stethoscope.capture.system import DeviceMemory, GcPauses, HostStats, default_device_memory, device_metrics
from stethoscope.capture.tensors import detach, ids_to_host, length, to_host
from stethoscope.capture.throughput import detect_peak_flops, flops_per_token
from stethoscope.capture.wiring import (alerts_config, exporters, grad_stats, live_alerts, live_detection, lr_used,
                                        nonfinite_locator, recovery_policy, start_exports)
from stethoscope.config import MonitorConfig
from stethoscope.errors import InternalError
from stethoscope.record.writer import Recorder
from stethoscope.store.db import RunStore, fresh_run_dir, rank_path
from stethoscope.store.schema import RUN_META_FILE

log = logging.getLogger(__name__)


class Monitor:
    """Records a training run into `run_dir` (one SQLite file per rank).

    Pass the model and optimizer to capture gradient/parameter norms, LR and data-wait time without
    further code; `tokens_per_step` (this rank's tokens per optimizer step) enables tokens/s and MFU.
    `config` is your training config, stored as run metadata. Options of `MonitorConfig` may be
    given as keywords (`flush_interval=0.5`, `grad_norms="layers"`, `detect=DetectConfig(...)`, …) or
    as `settings=`. A `run_dir` that already holds a run is continued only with `resume=True`; otherwise
    this run is recorded beside it in `run_dir-2` (`mon.run_dir` says where). `store` replaces the rank's
    SQLite store (a fake from `stethoscope.testing`). `debug_nonfinite=True` (or a
    `stethoscope.debug.NonfiniteWatch`) re-runs the batch of the first non-finite step through
    `stethoscope.debug.locate_nonfinite` and stores the report as a `debug` event (pass `batch=` to `step`).
    `export` forwards the run live to other tools ("tensorboard", "wandb", "mlflow", "prometheus" or
    exporter objects from `stethoscope.exporters`); `prometheus_port` serves `/metrics` on 127.0.0.1
    (0: a free port; `mon.exports` says which).
    """

    def __init__(self, run_dir: str | os.PathLike[str], model: Any = None, optimizer: Any = None, *,
                 tokens_per_step: int | None = None, samples_per_step: int | None = None,
                 seq_len: int | None = None, config: Any = None, scaler: Any = None,
                 max_grad_norm: float | None = None, peak_flops: float | None = None,
                 rank: int | None = None, world_size: int | None = None,
                 settings: MonitorConfig | None = None, device_memory: DeviceMemory | None = None,
                 store: RunStore | None = None, resume: bool = False, checkpoints: Any = None,
                 recovery: Any = None, debug_nonfinite: Any = False, export: Any = None,
                 prometheus_port: int | None = None, **options: Any) -> None:
        self.settings = settings or MonitorConfig(**options)
        self.run_dir = Path(run_dir)
        self.control = Control()
        self.errors = 0
        self._closed = False
        self._alerts: Any = None
        auto_rank, auto_world = rank_and_world()
        self.rank = auto_rank if rank is None else rank
        self.world_size = auto_world if world_size is None else world_size
        self._model, self._opt, self._scaler = model, optimizer, scaler
        self._tokens_per_step, self._samples_per_step = tokens_per_step, samples_per_step
        self._max_grad_norm = max_grad_norm
        self._pending: list[tuple[int, float, dict[str, Any]]] = []
        self._pending_batches: list[tuple[int, Any]] = []
        self._last_call: float | None = None
        self._compute_start: float | None = None
        self._last_flush = time.perf_counter()
        self._own_seconds = 0.0  # checkpoint saves and rollbacks since the last step (`_own_work`)
        self._last_system = 0.0
        self._user_grad_norm = False
        self.last_step: int | None = None
        self.steps = 0
        self.checkpoints = checkpoints
        """The `stethoscope.Checkpoints` this Monitor saves after steps and resumes from, or None."""

        detection = self._live_detection()  # before the writer starts: a bad config leaves no thread behind
        self.recovery = recovery_policy(recovery, detection, checkpoints)
        """The automatic recovery policy's state (`stethoscope.Recovery`): rollbacks, skips, `lr_scale`; or None."""
        alerts = alerts_config(self.settings.alerts, detection)  # a bad alerts file fails here, naming the key
        self._nonfinite = nonfinite_locator(debug_nonfinite, model, scaler, self._write_events)
        export = exporters(export, prometheus_port)  # a misspelt exporter or a missing package: here
        if store is None:
            self._claim_run_dir(resume)
        store = store if store is not None else RunStore(rank_path(self.run_dir, self.rank))
        self._recorder = Recorder(store, self.settings.flush_interval, self.settings.max_queue, self.settings.strict)
        self._info = start_info(self.rank, self.world_size, config)
        self._recorder.call("set_meta", self._info)
        self._write_run_json()
        self._detection = detection
        self._probe = self._start_probe(model)  # the probe server, hang watchdog, cross-rank health
        self._alerts = live_alerts(alerts, self._recorder.store, self.rank, self.run_dir, self.settings.strict)
        if self.recovery is not None:
            self.recovery.bind(self)
        self.exports = start_exports(self._recorder, export, self.run_dir, self.rank, self.world_size,
                                     self._info.get("config"))
        chain = observer_chain(detection, self.control, probe=self._probe, alerts=self._alerts,
                               recovery=self.recovery, exports=self.exports)
        if chain is not None:
            self._recorder.observers.append(chain)
        if getattr(self.exports, "prometheus_url", None):  # where to scrape, beside the run's other facts
            self._info["prometheus_url"] = self.exports.prometheus_url
            self._write_run_json()
        self._host = HostStats()
        self._gc = GcPauses()
        self._device_memory = device_memory if device_memory is not None else default_device_memory()
        self._gpu = self._start_gpu_health()
        if self._probe is not None:
            self._probe.gpu = self._gpu  # a straggler's health vector says whether its GPU throttles
        self._flops_per_token = flops_per_token(model, seq_len) if model is not None else None
        self._peak_flops = peak_flops or detect_peak_flops()
        self._grads = grad_stats(self.settings, model, optimizer)
        self._lr_used = lr_used(optimizer)
        self._forward_hook = model.register_forward_pre_hook(self._on_forward) if model is not None else None
        if checkpoints is not None:
            checkpoints.attach(self, model, optimizer, scaler, self._checkpoint_event)
        atexit.register(self._atexit)

    # -- setup ---------------------------------------------------------------------------------
    def _start_probe(self, model: Any) -> Any:
        if self.settings.serve is False:
            return None
        try:
            from stethoscope.probe.live import for_monitor

            return for_monitor(self.settings.serve, self, run_dir=self.run_dir, rank=self.rank,
                               world_size=self.world_size, recorder=self._recorder, model=model,
                               strict=self.settings.strict)
        except Exception as exc:  # noqa: BLE001 - a port in use, a read-only home: the run goes on unprobed
            self._fail(exc, "starting the probe server", always_log=True)
            return None

    def _start_gpu_health(self) -> Any:
        try:
            return start_gpu_health(self.settings.gpu_health, self._recorder.put_many, lambda: self.last_step,
                                    self.settings.system_every)
        except Exception as exc:  # noqa: BLE001 - a driver that misbehaves: the run goes on without GPU health
            self._fail(exc, "starting the GPU health sampler", always_log=True)
            return None

    def _live_detection(self) -> Any:
        return live_detection(self.settings.detect)

    def _claim_run_dir(self, resume: bool) -> None:
        """A run_dir holding an earlier run is never appended to unless resume=True: record beside it."""
        fresh = fresh_run_dir(self.run_dir, self.rank, resume)
        if fresh != self.run_dir:
            log.warning("stethoscope: %s already holds a run (pass resume=True to continue it); recording this "
                        "run in %s", self.run_dir, fresh)
            self.run_dir = fresh

    def _on_forward(self, *_: Any) -> None:
        if self._compute_start is None:
            self._compute_start = time.perf_counter()

    # -- the training loop's calls -------------------------------------------------------------
    def step(self, step: int, loss: Any = None, *, grad_norm: Any = None, batch_ids: Any = None,
             tokens: int | None = None, samples: int | None = None, batch: Any = None, **metrics: Any) -> Control:
        """Record one optimizer step. Cheap: no host sync, no I/O. Returns the Control to act on.
        `batch` (or a callable rebuilding it) is used only with `debug_nonfinite`, and held until the next flush."""
        try:
            if self._nonfinite is not None:
                self._nonfinite.note(step, batch)
            self._step(step, loss, grad_norm, batch_ids, tokens, samples, metrics)
            if self._probe is not None:
                self._probe.on_step(step)
            if self.checkpoints is not None or self.recovery is not None:
                self._own_work(step, metrics)
        except Exception as exc:  # noqa: BLE001 - never crash the run
            self._fail(exc)
        return self.control

    def _own_work(self, step: int, metrics: dict[str, Any]) -> None:
        """Checkpoint saves and rollbacks the Monitor carries out after a step. Their time is taken out of
        the next step's `perf/step_time_s` (a save every N steps would read as a periodic stall of the
        training) and recorded beside it as `perf/checkpoint_s`."""
        t0 = time.perf_counter()
        try:  # the hang watchdog does not count a save or a rollback as a stuck step
            with self._probe.paused() if self._probe is not None else contextlib.nullcontext():
                if self.checkpoints is not None:  # saves when due; on SIGTERM saves and exits (SystemExit)
                    self.checkpoints.note(metrics)
                    self.checkpoints.after_step(step, self.control)
                if self.recovery is not None:  # a rollback asked for by the writer thread is carried out here
                    self.recovery.after_step(step, self.control)
        finally:
            spent = time.perf_counter() - t0
            if self._last_call is not None:
                self._last_call += spent
            self._own_seconds += spent

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
        return {"detection": self._detection.state_dict() if self._detection is not None else None,
                "alerts": self._alerts.state_dict() if self._alerts is not None else None,
                "recovery": self.recovery.state_dict() if self.recovery is not None else None}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.flush()
        if self._detection is not None and state.get("detection") is not None:
            self._detection.load_state_dict(state["detection"])
        if self._alerts is not None and state.get("alerts") is not None:
            self._alerts.load_state_dict(state["alerts"])
        if self.recovery is not None and state.get("recovery") is not None:
            self.recovery.load_state_dict(state["recovery"])

    def _write_events(self, events: Any) -> None:
        self._recorder.call("write_events", events)

    def _checkpoint_event(self, step: int | None, kind: str, severity: str, message: str,
                          data: dict[str, Any]) -> None:
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
            if all(type(v) is float or type(v) is int for v in values.values()):
                self._recorder.put_many(values, step, time.time())
            else:
                self._pending.append((step, time.time(), {k: detach(v) for k, v in values.items()}))
                self._flush_pending()
        except Exception as exc:  # noqa: BLE001
            self._fail(exc)

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Make everything recorded so far durable in the store (blocks up to `timeout` seconds)."""
        try:
            self._flush_pending()
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
            self._flush_pending()
            self._info.update(status=status, end_time=time.time(), steps=self.steps, last_step=self.last_step,
                              dropped_points=self._recorder.queue.dropped, internal_errors=self.internal_errors)
            self._recorder.call("set_meta", {k: self._info[k] for k in
                                             ("status", "end_time", "steps", "last_step", "dropped_points",
                                              "internal_errors")})
            self._write_run_json()
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
        now = time.perf_counter()
        values: dict[str, Any] = {k: detach(v) for k, v in metrics.items()}
        if loss is not None:
            values[R.LOSS] = detach(loss)
        self._capture_grads(values, grad_norm)
        self._capture_lr(values)
        self._capture_timing(values, now, tokens, samples if samples is not None else length(batch_ids))
        if self._own_seconds:
            values[R.CHECKPOINT_TIME], self._own_seconds = self._own_seconds, 0.0
        values.update(self._gc.take())
        self._pending.append((step, time.time(), values))
        if batch_ids is not None:
            self._pending_batches.append((step, batch_ids))
        self.last_step, self.steps = step, self.steps + 1
        s = self.settings
        if len(self._pending) >= s.log_every or now - self._last_flush >= s.flush_interval / 2:
            self._flush_pending()
        self._last_call, self._compute_start = time.perf_counter(), None

    def _capture_grads(self, values: dict[str, Any], grad_norm: Any) -> None:
        hooked = self._grads.take() if self._grads is not None else {}
        if grad_norm is not None:
            if not self._user_grad_norm and self._grads is not None:
                self._grads.skip_global = True  # reuse the user's clip_grad_norm_ result from now on
            self._user_grad_norm = True
            hooked[R.GRAD_NORM] = detach(grad_norm)
        values.update(hooked)

    def _capture_lr(self, values: dict[str, Any]) -> None:
        used = self._lr_used.take() if self._lr_used is not None else {}
        if self._opt is None or R.LR in values:  # an LR the caller passed (the one the step used) wins
            return
        if used:  # what optimizer.step() used since the last call
            values.update(used)
            return
        for i, group in enumerate(self._opt.param_groups):
            lr = group.get("lr")
            if lr is not None:
                values[R.LR if i == 0 else f"{R.LR}/group{i}"] = detach(lr)

    def _capture_timing(self, values: dict[str, Any], now: float, tokens: int | None, samples: int | None) -> None:
        if self._last_call is None:
            return
        dt = now - self._last_call
        values[R.STEP_TIME] = dt
        if self._compute_start is not None:
            values[R.DATA_WAIT] = max(0.0, self._compute_start - self._last_call)
        tokens = tokens if tokens is not None else self._tokens_per_step
        samples = samples if samples is not None else self._samples_per_step
        if dt <= 0:
            return
        if samples:
            values[R.SAMPLES_PER_S] = samples / dt
        if tokens:
            tps = tokens / dt
            values[R.TOKENS_PER_S] = tps
            if self._flops_per_token:
                values[R.TFLOPS] = tps * self._flops_per_token / 1e12
                if self._peak_flops:
                    values[R.MFU] = tps * self._flops_per_token / self._peak_flops

    def _flush_pending(self) -> None:
        self._last_flush = time.perf_counter()
        pending, self._pending = self._pending, []
        if pending:
            self._put_values(pending)
        if self._pending_batches:
            batches, self._pending_batches = self._pending_batches, []
            steps = [s for s, _ in batches]
            self._recorder.call("write_batches", list(zip(steps, ids_to_host([ids for _, ids in batches]))))
        if self._last_flush - self._last_system >= self.settings.system_every:
            self._last_system = self._last_flush
            self._sample_system()

    def _put_values(self, pending: list[tuple[int, float, dict[str, Any]]]) -> None:
        rows: list[tuple[str, int, float, float]] = []
        tensors: list[Any] = []
        slots: list[int] = []
        for step, wall, values in pending:
            for name, v in values.items():
                if type(v) is not float and type(v) is not int:
                    tensors.append(v)
                    slots.append(len(rows))
                rows.append((name, step, v, wall))
        for slot, v in zip(slots, to_host(tensors) if tensors else ()):
            name, step, _, wall = rows[slot]
            rows[slot] = (name, step, v, wall)
        put = self._recorder.put_point
        for name, step, v, wall in rows:
            put(name, step, float(v), wall)
            if name == R.GRAD_NORM and self._max_grad_norm:
                put(R.GRAD_CLIP_COEF, step, min(1.0, self._max_grad_norm / (float(v) + 1e-6)), wall)
        if self._nonfinite is not None:
            self._nonfinite.check(rows)

    def _sample_system(self) -> None:
        step = self.last_step or 0
        values = self._host.sample()
        if self._device_memory is not None:
            values.update(device_metrics(self._device_memory))
        if self._scaler is not None and self._scaler.is_enabled():
            values[R.LOSS_SCALE] = float(self._scaler.get_scale())  # host sync: once per system sample
        self._recorder.put_many(values, step, time.time())

    def _write_run_json(self) -> None:
        if self.rank != 0:
            return
        path = self.run_dir / RUN_META_FILE
        tmp = path.with_suffix(".json.tmp")
        try:
            tmp.write_text(json.dumps(R.json_safe(self._info), indent=1, default=str))
            os.replace(tmp, path)
        except OSError as exc:  # a full disk, or the run directory deleted under the live run
            gone = " (the run directory is gone: deleted while the run was live?)" if not self.run_dir.is_dir() else ""
            self._fail(exc, f"writing {path}{gone}", always_log=True)  # at most twice a run

    def _finish(self) -> None:
        """Remove the hooks and stop the writer; each part runs even when an earlier one failed."""
        try:
            if getattr(self, "_probe", None) is not None:
                self._probe.detach(self)  # before the writer stops: a hang resolved at the end is recorded
            if getattr(self, "_gpu", None) is not None:
                self._gpu.close()  # its last sample reaches the writer before the writer stops
            for obj in (self._grads, self._gc, self._lr_used):
                if obj is not None:
                    obj.remove()
            if self._forward_hook is not None:
                self._forward_hook.remove()
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
        try:
            self.close("interpreter exit")
        except Exception:  # noqa: BLE001 - strict re-raised; a traceback at exit helps no one
            log.warning("stethoscope failed closing the run at interpreter exit", exc_info=True)
