"""Delivery off the training thread: per channel a daemon thread and a bounded queue; timeouts, bounded
retries; a channel that hangs delays no other.

`submit` never blocks (a full queue drops and records the drop). Each delivery is tried at most
`1 + retries` times, `backoff_s` doubling between tries, each try bounded by the channel's timeout.
`close(timeout)` lets what is queued go out until the deadline, then cuts a hanging request short
(`abort()`) and records what is left as not delivered: it never waits longer than `timeout`.
Outcomes (sent or failed) are collected for the writer thread to record in the run's store.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
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


class Dispatcher:
    """Delivers (channel index, alert) pairs: one lane (a queue and a thread started on first use) per
    channel, so a channel that hangs delays no other channel's messages."""

    def __init__(self, channels: list[Any], retries: int = 2, backoff_s: float = 0.5, max_pending: int = 256) -> None:
        self.channels = channels
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_pending = max_pending
        self.sent = 0
        self.failed = 0
        self._lanes = [_Lane(self, i) for i in range(len(channels))]
        self._outcomes: deque[Outcome] = deque()
        self._stop = threading.Event()
        self._deadline = float("inf")
        self._logged = False

    def submit(self, deliveries: list[tuple[int, Alert]]) -> None:
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

    def _record(self, ch: int, alert: Alert, ok: bool, attempts: int, error: str | None) -> None:
        channel = self.channels[ch]
        if error is not None:
            error = redact(error, getattr(channel, "secrets", ()))
        name = getattr(channel, "name", type(channel).__name__)
        if ok:
            self.sent += 1
        else:
            self.failed += 1
            if not self._logged:
                self._logged = True
                log.warning("stethoscope could not deliver an alert to %s (%s); the run goes on (failures are "
                            "recorded: stethoscope alerts RUN)", name, error)
        self._outcomes.append(Outcome(name, str(getattr(channel, "target", name)), alert, ok, attempts, error,
                                      time.time()))


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
