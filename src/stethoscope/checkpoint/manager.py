"""`Checkpoints`: the full training state saved atomically and verified, resumed from the newest good one.

Owned by the Monitor (`Monitor(..., checkpoints=Checkpoints(...))`): it saves every `every` steps after
`mon.step()`, on a `Control.checkpoint` request, and on SIGTERM/SIGUSR1 (preemption). Nothing here
raises into the training loop: a failed save is logged once, counted (`errors`) and recorded as an
event, and training goes on (`strict=True` re-raises, for tests).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stethoscope.checkpoint import disk, retention
from stethoscope.checkpoint.disk import CheckpointInfo
from stethoscope.checkpoint.manifest import HASHES, default_hash
from stethoscope.checkpoint.state import finite
from stethoscope.errors import InternalError

log = logging.getLogger(__name__)
Event = Callable[[int | None, str, str, str, dict[str, Any]], None]  # step, kind, severity, message, data
SIGNAL_MODES = ("exit", "stop", None)
FSYNC_MODES = ("background", "inline")


@dataclass
class CheckpointConfig:
    """When to save and what to keep."""

    every: int | None = None
    """Save after every `every` steps (None: only when asked, on a signal, or by `save()`)."""
    keep_last: int | None = 3
    """Keep this many newest checkpoints (None: keep all). The newest, the best and milestones always stay."""
    keep_best: str | None = None
    """Metric (e.g. "eval/loss") whose best checkpoint is always kept; its latest value is saved with each."""
    best_mode: str = "min"
    """"min" or "max": which end of `keep_best` is best."""
    milestones_every: int | None = None
    """Checkpoints at steps divisible by this are milestones, never deleted by retention."""
    hash: str | None = None
    """Content hash in the manifest: "xxh3" (the default: fastest), "crc32" (the default without the `xxhash`
    package) or "sha256"."""
    async_save: bool = False
    """Copy the state to host memory on the training thread, write it on a background thread."""
    overlap_copy: bool = False
    """With `async_save`: the optimizer's parameters and state are copied by the background thread while the
    next forward and backward run, and the optimizer's next `step()` waits until they are (a step pre-hook);
    the save holds the training thread only to copy the rest (buffers, RNG, other objects). Only for loops
    that change those tensors solely through `optimizer.step()`: weight clipping or any other in-place edit
    of the parameters between steps would race with the copy."""
    fsync: str = "background"
    """"background": a save returns once every byte is written (to the page cache) and hashed; the fsyncs
    and the rename that publishes the checkpoint run on a thread, so it costs about one plain torch.save.
    Until it is durable it is not in the catalogue (a crash, even of the machine, leaves the previous
    checkpoints), retention deletes nothing, and `wait()`, `list()`, `load_latest()`, the next save and
    `close()` wait for it. "inline": the save returns only once the checkpoint is durable and published."""
    on_signal: str | None = "exit"
    """On SIGTERM/SIGUSR1: "exit" (finish the step, save, close the Monitor, exit 0), "stop" (save and
    set `Control.stop`), None (install no handler)."""
    trust: bool = False
    """Unpickle arbitrary objects when loading (only for checkpoints you wrote yourself)."""
    strict: bool = False
    """Re-raise failures (tests); by default a failed save is logged, counted and training goes on."""

    def __post_init__(self) -> None:
        for name in ("every", "keep_last", "milestones_every"):
            v = getattr(self, name)
            if v is not None and (type(v) is not int or v < 1):
                raise ValueError(f"{name} must be an int >= 1 or None, got {v!r}")
        if self.best_mode not in ("min", "max"):
            raise ValueError(f"best_mode must be 'min' or 'max', got {self.best_mode!r}")
        if self.hash is None:
            self.hash = default_hash()
        if self.hash not in HASHES:
            raise ValueError(f"hash must be one of {HASHES}, got {self.hash!r}")
        if self.overlap_copy and not self.async_save:
            raise ValueError("overlap_copy=True needs async_save=True (it overlaps the async save's copy)")
        if self.fsync not in FSYNC_MODES:
            raise ValueError(f"fsync must be one of {FSYNC_MODES}, got {self.fsync!r}")
        if self.on_signal not in SIGNAL_MODES:
            raise ValueError(f"on_signal must be one of {SIGNAL_MODES}, got {self.on_signal!r}")


class Checkpoints:
    """Verified checkpoints of the full training state in `dir` (see the README's "Checkpoints").

    The Monitor attaches the model, optimizer and grad scaler it was given; pass the rest here:
    `scheduler` and `data` (anything with `state_dict()`/`load_state_dict()`, e.g. a sampler that
    knows its position) and `extra` (name → such objects).
    """

    def __init__(self, dir: str | os.PathLike[str], every: int | None = None, *, keep_last: int | None = 3,
                 keep_best: str | None = None, milestones_every: int | None = None, scheduler: Any = None,
                 data: Any = None, extra: Mapping[str, Any] | None = None, **options: Any) -> None:
        self.config = CheckpointConfig(every=every, keep_last=keep_last, keep_best=keep_best,
                                       milestones_every=milestones_every, **options)
        self.dir = Path(dir)
        self.objects: dict[str, Any] = {k: v for k, v in (("scheduler", scheduler), ("data", data)) if v is not None}
        self.objects.update(extra or {})
        self.errors = 0
        self.saved = 0
        self.loaded: dict[str, Any] | None = None
        """What the last `load_latest()` returned: the state of every part, `step` and `path`."""
        self.preempted: int | None = None
        self.last_blocking_s = 0.0
        """Seconds the last save held the training thread."""
        self.last_durable_s = 0.0
        """Seconds from the start of the last save until it was durable and published."""
        self.hold: int | None = None
        """Retention keeps the newest checkpoint at or before this step (set by automatic recovery while an
        incident is open: it is what a rollback goes back to)."""
        self.lookback: int | None = None
        """Set by automatic recovery: retention also keeps the newest checkpoint at or before each of the last
        two multiples of `lookback` steps, so a finding up to `lookback` steps late (a divergence is seen over
        a trend) still finds one from before its onset, at most 2 × `lookback` steps back."""
        self._metric: Any = None
        self._deferred: int | None = None  # the scheduled save's step while the loss is non-finite
        self._monitor: Any = None
        self._event: Event | None = None
        self._thread: threading.Thread | None = None
        self._remover: threading.Thread | None = None
        self._staging: Any = None
        self._step_hook: Any = None
        self._old_handlers: dict[int, Any] = {}

    # -- wiring ------------------------------------------------------------------------------------
    def attach(self, monitor: Any = None, model: Any = None, optimizer: Any = None, scaler: Any = None,
               event: Event | None = None) -> None:
        """Called by the Monitor: the objects it knows, and where events go."""
        for name, obj in (("model", model), ("optimizer", optimizer), ("scaler", scaler), ("monitor", monitor)):
            if obj is not None:
                self.objects.setdefault(name, obj)
        self._monitor, self._event = monitor, event
        if getattr(monitor, "world_size", 1) > 1:  # every rank saves its own state (RNG, data position, shards)
            self.dir = self.dir / f"rank-{monitor.rank:05d}"
        self._install_signals()

    def note(self, values: Mapping[str, Any]) -> None:
        """The latest value of the `keep_best` metric (a tensor stays on the device until a save)."""
        metric = self.config.keep_best
        if metric is not None and metric in values:
            self._metric = values[metric]

    # -- the training loop's side -----------------------------------------------------------------
    def after_step(self, step: int, control: Any, loss: Any = None) -> None:
        """Save when due, asked or preempted; on a signal, exit or ask the loop to stop. A scheduled save
        at a non-finite `loss` waits for a finite one (NaN weights would rotate the good checkpoints out)."""
        c = self.config
        if self.preempted is not None:
            name = signal.Signals(self.preempted).name
            self.save(step, reason=f"{name} (preemption)", wait=True)
            self.preempted = None
            if c.on_signal == "stop":
                control.request_stop(f"{name}: emergency checkpoint saved at step {step}")
                return
            if self._monitor is not None:
                self._monitor.close(f"preempted ({name})")
            raise SystemExit(0)
        if control is not None and control.checkpoint:
            control.checkpoint = False
            self.save(step, reason="requested")
        elif (c.every and step > 0 and step % c.every == 0) or self._deferred is not None:
            if not finite(loss):
                if self._deferred is None:
                    self._deferred = step
                    log.warning("stethoscope: %s", msg := f"scheduled checkpoint of step {step} not saved: the loss "
                                "is non-finite; the next step with a finite loss saves it")
                    self._emit(step, "checkpoint_deferred", "warning", msg, {"step": step})
                return
            first, self._deferred = self._deferred, None
            self.save(step, reason="scheduled" if first is None else f"scheduled, deferred from step {first}")

    def save(self, step: int, *, reason: str = "requested", wait: bool = False) -> Path | None:
        """Save the full state as the checkpoint of `step`; the path it has once published. Never raises
        (unless strict). By default the fsyncs and the rename run on a thread (`fsync="background"`) and the
        whole write does with `async_save=True`: `wait=True` returns only once the checkpoint is durable
        and in place (as `wait()` after the call does)."""
        try:
            return self._save(step, reason, wait)
        except Exception as exc:  # noqa: BLE001 - never crash the run
            self._fail(step, exc)
            return None

    def wait(self) -> None:
        """Wait for a save in flight (an asynchronous one, or the fsyncs of a synchronous one)."""
        t, self._thread = self._thread, None
        if t is not None:
            t.join()

    def close(self) -> None:
        self.wait()
        self._join_remover()
        hook, self._step_hook = self._step_hook, None
        if hook is not None:
            hook.remove()

        for sig, old in self._old_handlers.items():
            try:
                signal.signal(sig, old)
            except (ValueError, OSError):
                pass
        self._old_handlers.clear()

    # -- reading -------------------------------------------------------------------------------
    def list(self, verify: bool = False) -> list[CheckpointInfo]:
        """Every checkpoint in `dir`, oldest first (`verify=True` checks every hash)."""
        self.wait()
        return disk.catalogue(self.dir, check_hashes=verify)

    def load_latest(self, before: int | None = None) -> dict[str, Any] | None:
        """The state of the newest checkpoint that verifies (at or before step `before`), or None.

        Corrupt, truncated and half-written checkpoints are skipped with a warning naming them and why.
        """
        self.wait()
        for info in reversed(disk.catalogue(self.dir)):
            if before is not None and info.step > before:
                continue
            checked = disk.describe(info.path, info.step, True) if info.status in disk.USABLE else info
            if checked.status != "ok":
                self._skip(checked)
                continue
            try:
                state = self._read(checked)
            except Exception as exc:  # noqa: BLE001 - verified bytes that still do not load: skip it too
                checked.status, checked.reason = "corrupt", f"does not load ({type(exc).__name__}: {exc})"
                self._skip(checked)
                continue
            self.loaded = state
            return state
        return None

    def restore(self, before: int | None = None) -> int | None:
        """Load the newest verified checkpoint into the attached objects; its step, or None."""
        state = self.load_latest(before)
        if state is None:
            return None
        for name, obj in self.objects.items():
            if name in state and hasattr(obj, "load_state_dict"):
                obj.load_state_dict(state[name])
        if "rng" in state:
            from stethoscope.checkpoint.state import set_rng_state

            set_rng_state(state["rng"])
        self._emit(state["step"], "checkpoint_loaded", "info", f"resumed from {state['path']}",
                   {"path": str(state["path"]), "step": state["step"]})
        return state["step"]

    def rollback(self, before: int, lr_factor: float | None = None) -> int | None:
        """Go back to the newest verified checkpoint at or before step `before`: restore it, set the
        checkpoints after it aside as `superseded-step-N/` (a crash later never resumes into the
        abandoned steps; they are kept, not deleted) and multiply every LR by `lr_factor` when given.
        Its step (continue from step + 1), or None when there is none to go back to."""
        self.wait()  # an async save in flight (of a step being abandoned) lands first, then is set aside
        step = self.restore(before)
        if step is None:
            return None
        self._deferred = None
        newer = [i for i in disk.catalogue(self.dir) if i.step > step and i.status != "partial"]
        for info in newer:
            os.rename(info.path, info.path.with_name(f"superseded-{info.path.name}-{time.time_ns()}"))
        if newer:
            disk.fsync_path(self.dir)
        if lr_factor is not None:
            self._scale_lr(lr_factor)
        self._emit(step, "rollback", "warning", f"rolled back to step {step} (asked: at or before {before})",
                   {"step": step, "before": before, "superseded": [i.step for i in newer], "lr_factor": lr_factor})
        return step

    def _scale_lr(self, factor: float) -> None:
        opt, sched = self.objects.get("optimizer"), self.objects.get("scheduler")
        for group in opt.param_groups if opt is not None else ():
            group["lr"] *= factor
        if sched is not None and hasattr(sched, "base_lrs"):  # a schedule recomputing LRs from base_lrs
            sched.base_lrs = [lr * factor for lr in sched.base_lrs]

    def prune(self) -> list[CheckpointInfo]:
        """Apply retention now; the checkpoints deleted."""
        self.wait()
        c = self.config
        gone = retention.to_delete(disk.catalogue(self.dir), c.keep_last, c.keep_best, c.best_mode)
        for info in gone:
            disk.delete_checkpoint(info.path)
        return gone

    # -- internals -----------------------------------------------------------------------------
    def _save(self, step: int, reason: str, wait: bool) -> Path | None:
        t0 = time.perf_counter()
        self.wait()  # one save in flight at a time
        parts, meta = self._collect(step, reason)
        if self.config.async_save and not wait:
            if self._staging is None:
                from stethoscope.checkpoint.staging import HostStaging

                self._staging = HostStaging()
            parts = self._staging.copy(parts, self._deferrable())
            try:
                self._start(self._write_guarded, step, parts, meta, t0)
            finally:
                if self._thread is None or not self._thread.is_alive():
                    self._staging.copied.set()  # no writer: nothing will make the deferred copies
            self.last_blocking_s = time.perf_counter() - t0
            return disk.step_dir(self.dir, step)
        disk.sweep_leftovers(self.dir)
        background = self.config.fsync == "background" and not wait
        # In the background the hashes and fsyncs wait until every file is written: done alongside, they
        # would slow the writes the training thread waits for.
        staged = disk.stage(self.dir, step, parts, meta, self.config.hash, overlap=not background)
        del parts
        if background:
            self._start(self._publish_guarded, staged, meta, t0)
            self.last_blocking_s = time.perf_counter() - t0
            return staged.final
        path = self._publish(staged, meta, t0)
        self.last_blocking_s = time.perf_counter() - t0
        return path

    def _deferrable(self) -> frozenset[int]:
        """Addresses of the tensors only `optimizer.step()` changes (`overlap_copy`), with the pre-hook that
        holds that step until the writer thread copied them installed; empty when not overlapping."""
        opt = self.objects.get("optimizer")
        if not self.config.overlap_copy or not hasattr(opt, "register_step_pre_hook"):
            return frozenset()
        if self._step_hook is None:
            self._step_hook = opt.register_step_pre_hook(self._before_step)
        ptrs = {p.data_ptr() for g in opt.param_groups for p in g["params"]}
        ptrs.update(v.data_ptr() for s in opt.state.values() for v in s.values() if hasattr(v, "data_ptr"))
        return frozenset(ptrs)

    def _before_step(self, *_: Any) -> None:
        """Before `optimizer.step()` changes what a save still copies: wait for that copy (counted as blocking)."""
        staging, thread = self._staging, self._thread
        if staging is None or staging.copied.is_set():
            return
        t0 = time.perf_counter()
        while not staging.copied.wait(0.1) and thread is not None and thread.is_alive():
            pass
        self.last_blocking_s += time.perf_counter() - t0

    def _start(self, target: Callable[..., None], *args: Any) -> None:
        # Not a daemon: a script that saves and exits without close() still gets its checkpoint published.
        self._thread = threading.Thread(target=target, args=args, name="stethoscope-checkpoint")
        self._thread.start()

    def _collect(self, step: int, reason: str) -> tuple[dict[str, Any], dict[str, Any]]:
        from stethoscope.checkpoint.state import rng_state

        parts = {name: obj.state_dict() for name, obj in self.objects.items()}
        parts["rng"] = rng_state()
        parts["meta"] = {"step": step}
        c = self.config
        metrics = {}
        if c.keep_best is not None and self._metric is not None:
            metrics[c.keep_best] = float(self._metric)  # host sync: once per save
        milestone = bool(c.milestones_every and step % c.milestones_every == 0)
        return parts, {"reason": reason, "metrics": metrics, "milestone": milestone}

    def _write_guarded(self, step: int, parts: dict[str, Any], meta: dict[str, Any], t0: float) -> None:
        try:
            self._staging.settle()  # device-to-host copies still running: the writer waits, not training
            disk.sweep_leftovers(self.dir)
            self._publish(disk.stage(self.dir, step, parts, meta, self.config.hash, overlap=True), meta, t0)
        except Exception as exc:  # noqa: BLE001 - a background save never takes the run down
            self._fail(step, exc, raise_strict=False)

    def _publish_guarded(self, staged: disk.Staged, meta: dict[str, Any], t0: float) -> None:
        try:
            self._publish(staged, meta, t0)
        except Exception as exc:  # noqa: BLE001 - a background fsync never takes the run down
            shutil.rmtree(staged.tmp, ignore_errors=True)
            self._fail(staged.step, exc, raise_strict=False)

    def _publish(self, staged: disk.Staged, meta: dict[str, Any], t0: float) -> Path:
        """Make a staged checkpoint durable and visible, then apply retention (which deletes older ones only
        now that the new one is safe) and record the event."""
        step = staged.step
        path = disk.commit(staged)
        self.last_durable_s = time.perf_counter() - t0
        self.saved += 1
        c = self.config
        holds = [] if self.hold is None else [self.hold]
        if self.lookback:
            anchor = step // self.lookback * self.lookback
            holds += [anchor, anchor - self.lookback]
        gone = retention.to_delete(disk.catalogue(self.dir), c.keep_last, c.keep_best, c.best_mode, protect=step,
                                 hold=holds)
        self._remove([disk.retire(info.path) for info in gone])
        size = sum(p.stat().st_size for p in path.iterdir())
        self._emit(step, "checkpoint", "info", f"checkpoint saved: {path} ({meta['reason']})",
                   {"path": str(path), "bytes": size, "reason": meta["reason"], "metrics": meta["metrics"],
                    "deleted": [str(i.path) for i in gone]})
        return path

    def _remove(self, trash: list[Path]) -> None:
        """Delete retired checkpoints on a thread: unlinking GBs takes a while and blocks nothing here."""
        if not trash:
            return
        disk.fsync_path(self.dir)
        self._join_remover()
        self._remover = threading.Thread(target=lambda: [shutil.rmtree(t, ignore_errors=True) for t in trash],
                                         name="stethoscope-checkpoint-prune", daemon=True)
        self._remover.start()

    def _join_remover(self) -> None:
        t, self._remover = self._remover, None
        if t is not None:
            t.join()

    def _read(self, info: CheckpointInfo) -> dict[str, Any]:
        import torch

        state: dict[str, Any] = {"step": info.step, "path": info.path}
        for name in info.files:
            state[name.removesuffix(".pt")] = torch.load(info.path / name, map_location="cpu",
                                                        weights_only=not self.config.trust)
        return state

    def _skip(self, info: CheckpointInfo) -> None:
        log.warning("stethoscope: skipped checkpoint %s: %s", info.path, info.reason)
        self._emit(info.step, "checkpoint_skipped", "warning", f"skipped checkpoint {info.path}: {info.reason}",
                   {"path": str(info.path), "reason": info.reason})

    def _emit(self, step: int | None, kind: str, severity: str, message: str, data: dict[str, Any]) -> None:
        if self._event is not None:
            try:
                self._event(step, kind, severity, message, data)
            except Exception:  # noqa: BLE001 - the store is failing: the Monitor counts that
                pass

    def _fail(self, step: int, exc: Exception, raise_strict: bool = True) -> None:
        self.errors += 1
        if self.errors == 1:
            log.warning("stethoscope: checkpoint of step %d failed: %s; training goes on (further failures are "
                        "only counted)", step, exc, exc_info=exc)
        self._emit(step, "checkpoint_failed", "error", f"checkpoint of step {step} failed: {exc}",
                   {"error": repr(exc)})
        if self.config.strict and raise_strict:
            raise InternalError(f"checkpoint of step {step} failed: {exc!r}") from exc

    def _install_signals(self) -> None:
        if self.config.on_signal is None or threading.current_thread() is not threading.main_thread():
            return
        for name in ("SIGTERM", "SIGUSR1"):
            sig = getattr(signal, name, None)
            if sig is not None and sig not in self._old_handlers:
                self._old_handlers[sig] = signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self.preempted = signum  # acted on after the current step, in after_step
