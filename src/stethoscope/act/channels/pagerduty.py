"""PagerDuty Events API v2: `trigger` with a stable `dedup_key` per incident, `resolve` when it clears.

An escalation is another `trigger` with the same `dedup_key` (PagerDuty updates the open alert, no
second incident). When the run stops with the incident open, the last message is a `trigger` on the
same key saying so: the incident stays open for a person to resolve, since nothing got better.
The routing key is the secret; PagerDuty answers 202 on success, 400 on a bad event, 429 when throttled.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from stethoscope.act.alert import Alert
from stethoscope.act.channels.http import JsonPost, check_url, safe_target

EVENTS_URL = "https://events.pagerduty.com/v2/enqueue"
_SUMMARY_MAX = 1024
_DEDUP_MAX = 255


def pagerduty_event(alert: Alert, routing_key: str, source: str) -> dict[str, Any]:
    dedup = alert.key[-_DEDUP_MAX:]
    if alert.kind == "resolve":
        return {"routing_key": routing_key, "event_action": "resolve", "dedup_key": dedup}
    summary = f"{alert.title()}: {alert.message}" + (f" ({alert.note})" if alert.note else "")
    details = {label: text for label, text in alert.lines()}
    stamp = alert.onset_time if alert.onset_time is not None else alert.time
    payload = {
        "summary": summary[:_SUMMARY_MAX], "source": source, "severity": alert.severity,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp)),
        "component": f"rank {alert.rank}", "group": alert.run_dir or "stethoscope", "class": alert.type,
        "custom_details": details,
    }
    return {"routing_key": routing_key, "event_action": "trigger", "dedup_key": dedup, "payload": payload,
            "client": "stethoscope"}


class PagerDuty:
    """Sends Events API v2 events for one service (its integration's routing key)."""

    name = "pagerduty"

    def __init__(self, routing_key: str, min_severity: str = "error", url: str = EVENTS_URL,
                 source: str | None = None, timeout: float = 5.0) -> None:
        if not isinstance(routing_key, str) or not routing_key:
            raise ValueError("routing_key must be a non-empty string")
        self.min_severity = min_severity
        self.target = f"pagerduty {safe_target(check_url(url), keep_path=False)}"
        self.secrets = (routing_key,)
        self._routing_key = routing_key
        self._source = source or socket.gethostname()
        self._post = JsonPost(url, timeout)

    def send(self, alert: Alert) -> None:
        self._post.post(pagerduty_event(alert, self._routing_key, self._source))

    def abort(self) -> None:
        self._post.abort()
