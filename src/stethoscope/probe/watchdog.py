"""The hang watchdog: a thread that notices when no step has completed within the timeout.

The timeout calibrates itself: max(`hang_floor_s`, `hang_factor` × the p99 step interval seen so far).
Checkpoint saves and evals pause it (`paused()`). On a hang it snapshots every thread's stack, classifies
where the main thread waits (detect.hang), and reports a `hang` finding; it keeps sampling stacks until a
step completes, then reports the same finding resolved. `faulthandler.dump_traceback_later`, re-armed on
every tick, is the second line: if the GIL is held so long that this thread cannot run, the interpreter
itself dumps every thread into the run directory.
"""

from __future__ import annotations

import contextlib
import faulthandler
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from stethoscope.detect.hang import WHERE_TEXT, cause, classify
from stethoscope.findings.catalogue import HANG, resolve_steps
from stethoscope.probe import stacks
from stethoscope.probe.config import ProbeConfig
from stethoscope.records import Finding

log = logging.getLogger(__name__)

FAULTHANDLER_FILE = "hang-traceback-rank-{rank:05d}.txt"


class Watchdog:
    """`beat(step)` from the training thread (O(1)); everything else on the watchdog's own thread.

    `on_snapshot(threads, snapshot_id)` stores stacks; `on_finding(finding)` reports a finding.
    """

    def __init__(self, config: ProbeConfig, rank: int, on_finding: Callable[[Finding], None],
                 on_snapshot: Callable[[list[dict[str, Any]], int], None], run_dir: str | Path | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.rank = rank
        self._on_finding, self._on_snapshot = on_finding, on_snapshot
        self._clock = clock
        self._intervals: deque[float] = deque(maxlen=1000)
        self._last_beat = clock()
        self._last_step: int | None = None
        self._beats = 0
        self._paused = 0
        self.hang: dict[str, Any] | None = None
        """The open hang (its evidence), or None."""
        self.hangs = 0
        self._resumed_at: tuple[int, float] | None = None
        self._stop = threading.Event()
        self._fault_file: Any = None
        if config.faulthandler and run_dir is not None:
            self._fault_file = _open_fault_file(Path(run_dir), rank)
            self._arm_faulthandler()  # armed now: the GIL may be taken before this thread's first tick
        self._thread = threading.Thread(target=self._run, name="stethoscope-watchdog", daemon=True)
        self._thread.start()

    # -- training thread ------------------------------------------------------------------------
    def beat(self, step: int) -> None:
        now = self._clock()
        if self._beats:
            self._intervals.append(now - self._last_beat)
        self._last_beat, self._last_step = now, step
        self._beats += 1
        if self.hang is not None and self._resumed_at is None:
            self._resumed_at = (step, time.time())  # the first step that completed after the hang

    def touch(self) -> None:
        """Progress that is not a step (an eval's forward pass): restarts the clock, records no interval."""
        self._last_beat = self._clock()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No hang is declared inside (a checkpoint save, an eval); the time spent does not count."""
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1
            self._last_beat = self._clock()

    # -- the watchdog thread --------------------------------------------------------------------
    def timeout(self) -> float:
        floor = self.config.hang_floor_s
        if len(self._intervals) < 5:
            return floor
        ordered = sorted(self._intervals)
        p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
        return max(floor, self.config.hang_factor * p99)

    def _run(self) -> None:
        tick = min(1.0, self.config.hang_floor_s / 10)
        next_sample = 0.0
        seen_beats = self._beats
        resolve_after = resolve_steps(HANG) or 1  # steps completed after a hang that end it
        while not self._stop.wait(tick):
            try:
                self._arm_faulthandler()
                now = self._clock()
                if self.hang is not None:
                    if self._beats - seen_beats >= resolve_after:
                        self._resolve(now)
                    elif now >= next_sample and self.hang["snapshots"] < self.config.hang_max_snapshots:
                        self._sample()
                        next_sample = now + self.config.hang_sample_s
                elif not self._paused and now - self._last_beat > self.timeout():
                    seen_beats = self._beats
                    self._declare(now)
                    next_sample = now + self.config.hang_sample_s
            except Exception:  # noqa: BLE001 - the watchdog must never die nor reach the trainer
                log.debug("stethoscope watchdog tick failed", exc_info=True)

    def _sample(self) -> tuple[list[dict[str, Any]], int]:
        threads = stacks.snapshot()
        snapshot_id = time.time_ns() // 1000
        self._on_snapshot(threads, snapshot_id)
        if self.hang is not None:
            self.hang["snapshots"] += 1
        return threads, snapshot_id

    def _declare(self, now: float) -> None:
        stalled, timeout = now - self._last_beat, self.timeout()
        threads, snapshot_id = self._sample()
        main = stacks.main_thread(threads)
        where = classify(main["frames"] if main else [])
        step = self._last_step
        self.hangs += 1
        self._resumed_at = None
        self.hang = {"rank": self.rank, "stalled_s": round(stalled, 3), "timeout_s": round(timeout, 3),
                     "last_step": step, "where": where["where"], "call": where["call"], "file": where["file"],
                     "line": where["line"], "snapshot": snapshot_id, "snapshots": 1, "threads": len(threads),
                     "since": time.time() - stalled}
        after = f"after step {step}" if step is not None else "since the run started"
        at = f" at {where['file']}:{where['line']}" if where["file"] else ""
        message = (f"rank {self.rank}: no step completed for {stalled:.0f} s {after} (timeout {timeout:.0f} s); "
                   f"the main thread waits in {WHERE_TEXT.get(where['where'], where['where'])}: "
                   f"{where['call']}{at}")
        self._on_finding(Finding(HANG, "critical", step, message, evidence=dict(self.hang), source="watchdog",
                                 causes=cause(where)))

    def _resolve(self, now: float) -> None:
        hang, self.hang = self.hang, None
        assert hang is not None
        step, at = self._resumed_at or (self._last_step, time.time())
        self._resumed_at = None
        hung_s = at - hang["since"]
        # Critical while it lasted (the page was right: the run was at stake); once the run went on, what is
        # left to act on is its cost: a warning. The alert keeps its critical page and resolves.
        message = (f"hang resolved on rank {self.rank}: step {step} completed after {hung_s:.0f} s without "
                   f"progress (it waited in {WHERE_TEXT.get(hang['where'], hang['where'])}); critical while it "
                   f"lasted, the run went on: {hung_s:.0f} s lost")
        evidence = dict(hang, recovered=True, hung_s=round(hung_s, 3), severity_while_open="critical")
        self._on_finding(Finding(HANG, "warning", hang["last_step"], message, end_step=step, evidence=evidence,
                                 source="watchdog", causes=cause(hang)))

    def _arm_faulthandler(self) -> None:
        if self._fault_file is not None:
            # re-armed every tick: it fires only when this thread could not run for that long (the GIL held)
            faulthandler.dump_traceback_later(2 * self.timeout() + 1, repeat=False, file=self._fault_file)

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(5.0)
        if self.hang is not None and self._resumed_at is not None:  # steps moved again just before the end
            self._resolve(self._clock())
        if self._fault_file is not None:
            faulthandler.cancel_dump_traceback_later()
            with contextlib.suppress(OSError):
                self._fault_file.close()
                path = Path(self._fault_file.name)
                if path.stat().st_size == 0:  # it never fired: leave no empty file in the run
                    path.unlink()
            self._fault_file = None


def _open_fault_file(run_dir: Path, rank: int) -> Any:
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        return open(run_dir / FAULTHANDLER_FILE.format(rank=rank), "a")  # noqa: SIM115 - lives with the watchdog
    except OSError:
        return None
