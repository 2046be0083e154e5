"""One writer thread per process: drains the queue into the rank store in batched transactions."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from typing import Any, Protocol

from stethoscope.errors import InternalError
from stethoscope.record.queue import BoundedQueue
from stethoscope.records import INTERNAL_ERRORS, QUEUE_DROPS, Finding
from stethoscope.store.db import RawPoint, RunStore

log = logging.getLogger(__name__)


class Observer(Protocol):
    """Sees every batch of points after it is durable, on the writer thread; may return findings."""

    def observe(self, points: Sequence[RawPoint]) -> list[Finding]: ...

    def finish(self) -> list[Finding]: ...


_first, _second, _third = itemgetter(0), itemgetter(1), itemgetter(2)


@dataclass(slots=True)
class _Batch:
    """Points gathered from the queue as columns: a name and a value per point, a step and a time per item
    (`counts`: how many points each item holds), spread with numpy at the end."""

    names: list[str] = field(default_factory=list)
    values: list[Any] = field(default_factory=list)
    steps: list[Any] = field(default_factory=list)
    times: list[Any] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)

    def add_steps(self, items: list[tuple[Any, Any, dict[str, Any]]]) -> None:
        """Items (step, time, values) of `put_many`, without a Python step per point."""
        dicts = list(map(_third, items))
        self.names += chain.from_iterable(dicts)
        self.values += chain.from_iterable(map(dict.values, dicts))
        self.steps += map(_first, items)
        self.times += map(_second, items)
        self.counts += map(len, dicts)

    def add(self, item: tuple[Any, ...]) -> None:
        """A `put_many` item (step, time, values) or a point (name, step, value, time)."""
        if len(item) == 3:
            step, t, values = item
            self.names += values
            self.values += values.values()
            self.steps.append(step)
            self.times.append(t)
            self.counts.append(len(values))
        else:
            self.names.append(item[0])
            self.values.append(item[2])
            self.steps.append(item[1])
            self.times.append(item[3])
            self.counts.append(1)

    def columns(self) -> tuple[Any, ...]:
        """(names, steps, values, times): steps and times as numpy arrays when the steps are ints."""
        import numpy as np

        steps = np.array(self.steps)
        if steps.dtype != np.int64:
            return self.names, self._spread(self.steps), self.values, self._spread(self.times)
        times = np.array(self.times, dtype=np.float64) if None not in self.times else self._spread(self.times)
        return self.names, np.repeat(steps, self.counts), self.values, \
            np.repeat(times, self.counts) if isinstance(times, np.ndarray) else times

    def _spread(self, per_item: list[Any]) -> list[Any]:
        out: list[Any] = []
        for x, k in zip(per_item, self.counts):
            out += [x] * k
        return out

    def points(self) -> list[RawPoint]:
        return list(zip(self.names, self._spread(self.steps), self.values, self._spread(self.times)))


@dataclass(slots=True)
class _Flush:
    done: threading.Event


@dataclass(slots=True)
class _Call:
    """Any other write: a store method name and its arguments, applied in queue order."""

    method: str
    args: tuple[Any, ...]


class Recorder:
    """Owns the queue, the writer thread and the store of one rank.

    `put_point` is the hot path (a tuple append). `flush()` returns once everything enqueued before
    it is committed. `close()` is idempotent and safe on a half-built object.
    """

    def __init__(self, store: RunStore, flush_interval: float = 1.0, max_queue: int = 1_000_000,
                 strict: bool = False) -> None:
        self.store = store
        self.flush_interval = flush_interval
        self.strict = strict
        self.queue = BoundedQueue(max_queue)
        self.observers: list[Observer] = []
        self.errors = 0
        self.other_errors = 0
        """Failures counted by the owner on its own thread (the Monitor's); reported in the same metric."""
        self.written = 0
        self._last_step = 0
        self._reported_drops = 0
        self._reported_errors = 0
        self._report_failed = False
        self._failure: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="stethoscope-writer", daemon=True)
        self._thread.start()

    # -- training-thread side ------------------------------------------------------------------
    def put_point(self, name: str, step: int, value: float, t: float | None) -> bool:
        return self.queue.put((name, step, value, t))

    def put_many(self, values: Mapping[str, float], step: int, t: float | None) -> None:
        if values:  # one item, (step, time, a copy of the values): the writer spreads it into columns
            self.queue.put_batch((step, t, dict(values)), len(values))

    def call(self, method: str, *args: Any, wake: bool = True) -> None:
        """Apply `RunStore.<method>(*args)` on the writer thread, in order with the points; `wake=False`: at
        the writer's next interval (at most flush_interval / 2 later), not at once."""
        self.queue.put_control(_Call(method, args), wake)

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Block until everything enqueued before this call is durable. False on timeout."""
        if self._closed or not self._thread.is_alive():
            return False
        ok = self.wait_durable(timeout)
        self._raise_if_strict()
        return ok

    def wait_durable(self, timeout: float | None) -> bool:
        """`flush()` for a thread other than the owner's (the alerts' settle thread): never raises, and leaves
        a failure for the owner's own flush or close to report. False on timeout or once closed."""
        if self._closed or not self._thread.is_alive() or threading.current_thread() is self._thread:
            return False
        done = threading.Event()
        self.queue.put_control(_Flush(done))
        return done.wait(timeout)

    def close(self, timeout: float = 30.0) -> None:
        if getattr(self, "_closed", True):
            return
        self._closed = True
        self.queue.put_control(_Flush(threading.Event()))
        self._thread.join(timeout)
        self._guard(self.store.close)
        self._raise_if_strict()

    # -- writer-thread side --------------------------------------------------------------------
    def _run(self) -> None:
        while not self._closed:
            self.queue.wake.wait(self.flush_interval / 2)
            self.queue.wake.clear()
            self._drain()
            self._report_drops()
        self._drain()
        self._report_drops()
        self._finish_observers()

    def _drain(self) -> None:
        while True:
            items = self.queue.drain()
            if not items:
                return
            self._handle(items)

    def _handle(self, items: list[Any]) -> None:
        types = list(map(type, items))
        controls = [] if types.count(tuple) == len(items) else [i for i, k in enumerate(types) if k is not tuple]
        start = 0
        points: list[Any] = []
        beside: list[Any] = []  # rows of calls that commute with the points (_BESIDE_POINTS), merged into one
        for i in [*controls, len(items)]:
            points += items[start:i]
            item = items[i] if i < len(items) else None
            start = i + 1
            if type(item) is _Call and item.method in _BESIDE_POINTS and len(item.args) == 1:
                beside += item.args[0]  # e.g. every log_every steps' batch ids: one transaction a wake, not one each
                continue
            self._write_segment(points)
            points = []
            if beside:
                self._guard(self.store.write_batches, beside)
                beside = []
            if type(item) is _Flush:
                item.done.set()
            elif item is not None:
                self._guard(getattr(self.store, item.method), *item.args)

    def _write_segment(self, segment: list[Any]) -> None:
        batch = _Batch()
        if set(map(len, segment)) <= {3}:  # steps' values only (put_many): gathered in C
            batch.add_steps(segment)
        else:
            for item in segment:
                batch.add(item)
        self.queue.taken(len(batch.names) - len(batch.counts) + 1)
        self._write_points(batch)

    def _write_points(self, batch: _Batch) -> None:
        if not batch.names:
            return
        cols = batch.columns()
        columns = getattr(self.store, "write_columns", None)  # a wrapping store may offer write_points alone
        if self._guard(columns, *cols) if columns is not None else self._guard(self.store.write_points, batch.points()):
            self.written += len(batch.names)
            self._last_step = batch.steps[-1]
            if self.observers:
                points = batch.points()
                for obs in self.observers:
                    self._record_findings(self._guard_value(obs.observe, points))

    def _finish_observers(self) -> None:
        for obs in self.observers:
            self._record_findings(self._guard_value(obs.finish))

    def _record_findings(self, findings: object) -> None:
        if isinstance(findings, list) and findings:
            self._guard(self.store.write_findings, findings, time.time())

    def _report_drops(self) -> None:
        dropped, errors = self.queue.dropped, self.errors + self.other_errors
        extra = {}
        if dropped != self._reported_drops:
            extra[QUEUE_DROPS] = float(dropped)
        if errors != self._reported_errors:
            extra[INTERNAL_ERRORS] = float(errors)
        if not extra:
            return
        rows = [(k, self._last_step, v, time.time()) for k, v in extra.items()]
        if self._report_failed:  # a full disk: retry each cycle, but count the failure once, not every 0.5 s
            try:
                self.store.write_points(rows)
            except Exception:  # noqa: BLE001 - already counted
                return
        elif not self._guard(self.store.write_points, rows):
            self._report_failed = True
            return
        self._report_failed = False
        self._reported_drops, self._reported_errors = dropped, errors

    def _guard(self, fn: Any, *args: Any) -> bool:
        return self._guard_value(fn, *args) is not _FAILED

    def _guard_value(self, fn: Any, *args: Any) -> Any:
        # Never crash the run: count, log the first traceback, keep going (strict re-raises later).
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - this is the error boundary
            self.errors += 1
            if self.errors == 1:
                log.exception("stethoscope writer failed (further failures are only counted)")
            if self.strict and self._failure is None:
                self._failure = exc
            return _FAILED

    def _raise_if_strict(self) -> None:
        if self._failure is not None:
            exc, self._failure = self._failure, None
            raise InternalError(f"stethoscope writer failed: {exc!r}") from exc


_FAILED = object()
# Store writes to a table that neither the points nor the observers touch: gathered over one wake and applied
# once, after the points before them (the steps' batch ids, handed over every log_every steps).
_BESIDE_POINTS = frozenset({"write_batches"})
