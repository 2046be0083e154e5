"""One writer thread per process: drains the queue into the rank store in batched transactions."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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
        put = self.queue.put
        for name, value in values.items():
            put((name, step, value, t))

    def call(self, method: str, *args: Any) -> None:
        """Apply `RunStore.<method>(*args)` on the writer thread, in order with the points."""
        self.queue.put_control(_Call(method, args))

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Block until everything enqueued before this call is durable. False on timeout."""
        if self._closed or not self._thread.is_alive():
            return False
        done = threading.Event()
        self.queue.put_control(_Flush(done))
        ok = done.wait(timeout)
        self._raise_if_strict()
        return ok

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
        points: list[RawPoint] = []
        for item in items:
            if type(item) is tuple:
                points.append(item)
                continue
            self._write_points(points)
            points = []
            if type(item) is _Flush:
                item.done.set()
            else:
                self._guard(getattr(self.store, item.method), *item.args)
        self._write_points(points)

    def _write_points(self, points: list[RawPoint]) -> None:
        if not points:
            return
        if self._guard(self.store.write_points, points):
            self.written += len(points)
            self._last_step = points[-1][1]
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
