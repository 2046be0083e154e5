"""The Channel protocol (`send(alert)`), its error, and the null and fan-out channels.

A channel is called on the delivery thread only, never on the training thread. Besides `send`, the
dispatcher reads three plain attributes when present: `min_severity` (default "warning"), `target`
(where it goes, with no secret in it: shown by `stethoscope alerts`) and `secrets` (strings to
blank out of any error text before it is logged or recorded); the rules read `escalates_itself`
(default False: True for a service whose own escalation policy pages the next person, PagerDuty,
which then gets no `escalate`); and the dispatcher calls `abort()`, when there is one, to cut a
hanging request short when the run closes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from stethoscope.act.alert import Alert


class Channel(Protocol):
    """Delivers one alert somewhere, or raises `DeliveryError`."""

    def send(self, alert: Alert) -> None: ...


class DeliveryError(Exception):
    """A delivery that failed; `retryable` when trying again may help (a timeout, a 5xx, a 429)."""

    def __init__(self, message: str, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


class NullChannel:
    """Sends nothing (alerts switched off, or a placeholder in tests)."""

    name = "null"
    target = "nowhere"

    def __init__(self, min_severity: str = "warning") -> None:
        self.min_severity = min_severity

    def send(self, alert: Alert) -> None:
        return None


class FanOut:
    """Sends to every channel; raises the first failure after trying them all."""

    name = "fanout"

    def __init__(self, channels: Iterable[Channel], min_severity: str = "warning") -> None:
        self.channels = list(channels)
        self.min_severity = min_severity
        self.target = ", ".join(getattr(c, "target", type(c).__name__) for c in self.channels)

    def send(self, alert: Alert) -> None:
        first: DeliveryError | None = None
        for channel in self.channels:
            try:
                channel.send(alert)
            except DeliveryError as exc:
                first = first or exc
        if first is not None:
            raise first


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret (of 4+ characters) replaced by '***'."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text
