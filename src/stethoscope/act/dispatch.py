"""Delivery off the training thread: per channel a daemon thread and a bounded queue; timeouts, bounded
retries; a channel that hangs delays no other.

`submit` never blocks (a full queue drops and records the drop). Each delivery is tried at most
`1 + retries` times, `backoff_s` doubling between tries, each try bounded by the channel's timeout.
`close(timeout)` lets what is queued go out until the deadline, then cuts a hanging request short
(`abort()`) and records what is left as not delivered: it never waits longer than `timeout`.
Outcomes (sent, failed, or held back) are collected for the writer thread to record in the run's store.

With `settle` (act/truth.py), a batch of deliveries first passes one more daemon thread that renders each
alert from the run's incidents and holds back what they grade below a channel's `min_severity`; it gets
at most `settle_s` a batch (half of what is left once `close` set a deadline), then the lanes deliver.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

from stethoscope.act.alert import Alert
from stethoscope.act.channels.base import DeliveryError, redact

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Outcome:
    """What became of one alert on one channel."""

    channel: str
    target: str
    alert: Alert
    ok: bool
    attempts: int
    error: str | None
    time: float
    held: bool = False
    """Not sent on purpose: the run's incidents grade it below the channel's `min_severity` (error says so)."""


class Dispatcher:
    """Delivers (channel index, alert) pairs: one lane (a queue and a thread started on first use) per
    channel, so a channel that hangs delays no other channel's messages."""

    def __init__(self, channels: list[Any], retries: int = 2, backoff_s: float = 0.5, max_pending: int = 256,
                 settle: Callable[[list[tuple[int, Alert]], float], tuple[list[Any], list[Any]]] | None = None,
                 settle_s: float = 5.0) -> None:
        self.channels = channels
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_pending = max_pending
        self.sent = 0
        self.failed = 0
        self.held = 0
        self._lanes = [_Lane(self, i) for i in range(len(channels))]
        self._settle, self._settle_s = settle, settle_s
        self._front = _Front(self) if settle is not None else None
        self._outcomes: deque[Outcome] = deque()
        self._stop = threading.Event()
        self._deadline = float("inf")
        self._logged = False

    def submit(self, deliveries: list[tuple[int, Alert]]) -> None:
        if self._front is not None and deliveries and not self._stop.is_set():
            self._front.put(deliveries)
            return
        self._to_lanes(deliveries)

    def _to_lanes(self, deliveries: list[tuple[int, Alert]]) -> None:
        for ch, alert in deliveries:
            lane = self._lanes[ch]
            if self._stop.is_set() or len(lane.queue) >= self.max_pending:
                why = "the run had closed" if self._stop.is_set() else f"{self.max_pending} alerts were waiting"
                self._record(ch, alert, False, 0, f"dropped: {why}")
                continue
            lane.put(alert)

    def outcomes(self) -> list[Outcome]:
        """Outcomes since the last call (called by one thread: the record writer)."""
        out = []
        while self._outcomes:
            out.append(self._outcomes.popleft())
        return out

    def close(self, timeout: float) -> None:
        """Deliver what is queued until `timeout` seconds from now; then give up on the rest."""
        self._deadline = time.monotonic() + timeout
        if self._front is not None:
            self._front.close(self._deadline)
        for lane in self._lanes:
            lane.closing = True
            lane.wake.set()
        for lane in self._lanes:
            if lane.thread is not None:
                lane.thread.join(max(0.0, self._deadline - time.monotonic() - 0.1))
        self._stop.set()
        for lane in self._lanes:
            if lane.thread is not None and lane.thread.is_alive():
                abort = getattr(self.channels[lane.index], "abort", None)
                if abort is not None and lane.busy:
                    abort()  # a request hanging past the deadline is cut short
        for lane in self._lanes:
            if lane.thread is not None:
                lane.thread.join(max(0.0, self._deadline - time.monotonic()))
        for lane in self._lanes:
            while lane.queue:  # never started, or left behind by the deadline
                self._record(lane.index, lane.queue.popleft(), False, 0,
                             f"not delivered: the run closed (delivery timeout {timeout:g} s)")

    # -- the delivery threads -----------------------------------------------------------------
    def _settled(self, batch: list[tuple[int, Alert]]) -> None:
        """The settle thread: render the batch from the run's incidents, hand it to the lanes."""
        budget = min(self._settle_s, max(0.0, (self._deadline - time.monotonic()) / 2))
        try:
            send, held = self._settle(batch, budget)  # type: ignore[misc]
        except Exception:  # noqa: BLE001 - settle falls back by itself; a bug in it must not cost the page
            log.exception("stethoscope could not settle alerts against the run's incidents; sent as found")
            send, held = batch, []
        for ch, alert, why in held:
            self._record(ch, alert, False, 0, why, held=True)
        self._to_lanes(send)

    def _deliver(self, ch: int, alert: Alert, lane: _Lane) -> None:
        channel = self.channels[ch]
        error = "not tried"
        for attempt in range(1, self.retries + 2):
            lane.busy = True
            try:
                channel.send(alert)
                self._record(ch, alert, True, attempt, None)
                return
            except DeliveryError as exc:
                error, retry = str(exc), exc.retryable
            except Exception as exc:  # noqa: BLE001 - a channel's bug must not end delivery
                error, retry = f"{type(exc).__name__}: {exc}", False
            finally:
                lane.busy = False
            delay = self.backoff_s * 2 ** (attempt - 1)
            if not retry or attempt > self.retries or self._stop.is_set() or \
                    time.monotonic() + delay > self._deadline or self._stop.wait(delay):
                break
        self._record(ch, alert, False, attempt, error)

    def _record(self, ch: int, alert: Alert, ok: bool, attempts: int, error: str | None, held: bool = False) -> None:
        channel = self.channels[ch]
        if error is not None:
            error = redact(error, getattr(channel, "secrets", ()))
        name = getattr(channel, "name", type(channel).__name__)
        if ok:
            self.sent += 1
        elif held:
            self.held += 1
        else:
            self.failed += 1
            if not self._logged:
                self._logged = True
                log.warning("stethoscope could not deliver an alert to %s (%s); the run goes on (failures are "
                            "recorded: stethoscope alerts RUN)", name, error)
        self._outcomes.append(Outcome(name, str(getattr(channel, "target", name)), alert, ok, attempts, error,
                                      time.time(), held))


class _Lane:
    """One channel's queue and delivery thread."""

    def __init__(self, owner: Dispatcher, index: int) -> None:
        self.owner, self.index = owner, index
        self.queue: deque[Alert] = deque()
        self.wake = threading.Event()
        self.closing = False
        self.busy = False
        self.thread: threading.Thread | None = None

    def put(self, alert: Alert) -> None:
        self.queue.append(alert)
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name=f"stethoscope-alerts-{self.index}", daemon=True)
            self.thread.start()
        self.wake.set()

    def _run(self) -> None:
        stop = self.owner._stop
        while not stop.is_set():
            if not self.queue:
                if self.closing:
                    return
                self.wake.wait(1.0)
                self.wake.clear()
                continue
            self.owner._deliver(self.index, self.queue.popleft(), self)


class _Front:
    """The settle thread in front of the lanes: batches in order, one at a time."""

    def __init__(self, owner: Dispatcher) -> None:
        self.owner = owner
        self.queue: deque[list[tuple[int, Alert]]] = deque()
        self.wake = threading.Event()
        self.closing = False
        self.abandoned = False
        self.thread: threading.Thread | None = None

    def put(self, batch: list[tuple[int, Alert]]) -> None:
        self.queue.append(batch)
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="stethoscope-alerts-settle", daemon=True)
            self.thread.start()
        self.wake.set()

    def close(self, deadline: float) -> None:
        """Settle what is queued, then leave; past half the time left, what is still queued goes out as found."""
        self.closing = True
        self.wake.set()
        if self.thread is not None:
            self.thread.join(max(0.0, (deadline - time.monotonic()) / 2))
        self.abandoned = True
        while self.queue:
            self.owner._to_lanes(self.queue.popleft())

    def _run(self) -> None:
        while not self.abandoned:
            if not self.queue:
                if self.closing:
                    return
                self.wake.wait(1.0)
                self.wake.clear()
                continue
            try:
                batch = self.queue.popleft()
            except IndexError:  # close() took it
                continue
            self.owner._settled(batch)
