"""A channel that keeps what it was sent: the fake for tests (also in `stethoscope.testing`)."""

from __future__ import annotations

import threading

from stethoscope.act.alert import Alert
from stethoscope.act.channels.base import DeliveryError


class MemoryChannel:
    """Appends every alert to `sent`; `fail_with` makes each send raise (a dead endpoint)."""

    name = "memory"
    target = "memory"

    def __init__(self, min_severity: str = "warning", fail_with: str | None = None) -> None:
        self.min_severity = min_severity
        self.fail_with = fail_with
        self.sent: list[Alert] = []
        self.attempts = 0
        self._lock = threading.Lock()

    def send(self, alert: Alert) -> None:
        with self._lock:
            self.attempts += 1
            if self.fail_with is not None:
                raise DeliveryError(self.fail_with)
            self.sent.append(alert)
