"""PagerDuty Events API v2: `trigger` with a stable `dedup_key` per incident, `resolve` when it clears.

PagerDuty folds a `trigger` on an open `dedup_key` into the open alert and pages nobody, so stethoscope
sends it no escalation (`escalates_itself`): the service's own escalation policy pages the next person
while nobody acknowledges. An incident whose severity first reaches this channel's `min_severity` later
arrives as its `trigger`. When the run stops with the incident open, a change event
(`/v2/change/enqueue`) puts "run stopped" on the service's timeline without paging again; the incident
stays open for a person to resolve, since nothing got better.
The routing key is the secret; PagerDuty answers 202 on success, 400 on a bad event, 429 when throttled.
"""

from __future__ import annotations

import socket
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from stethoscope.act.alert import Alert
from stethoscope.act.channels.http import JsonPost, check_url, safe_target

EVENTS_URL = "https://events.pagerduty.com/v2/enqueue"
CHANGE_PATH = "/v2/change/enqueue"
_SUMMARY_MAX = 1024
_DEDUP_MAX = 255


def pagerduty_event(alert: Alert, routing_key: str, source: str) -> dict[str, Any]:
    """The Events API v2 body: a resolve, a change event for `stop`, a trigger for the rest."""
    dedup = alert.key[-_DEDUP_MAX:]
    if alert.kind == "resolve":
        return {"routing_key": routing_key, "event_action": "resolve", "dedup_key": dedup}
    summary = f"{alert.title()}: {alert.message}" + (f" ({alert.note})" if alert.note else "")
    details = {label: text for label, text in alert.lines()}
    if alert.kind == "stop":
        stamp = alert.time or time.time()
        details["dedup_key"] = dedup
        return {"routing_key": routing_key, "payload": {
            "summary": summary[:_SUMMARY_MAX], "source": source,
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp)), "custom_details": details}}
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
    escalates_itself = True

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
        self._change = JsonPost(change_url(url), timeout)

    def send(self, alert: Alert) -> None:
        post = self._change if alert.kind == "stop" else self._post
        post.post(pagerduty_event(alert, self._routing_key, self._source))

    def abort(self) -> None:
        self._post.abort()
        self._change.abort()


def change_url(events_url: str) -> str:
    """The Change Events URL beside an Events API URL (same host: a proxy or a test server keeps working)."""
    parts = urlsplit(events_url)
    return urlunsplit((parts.scheme, parts.netloc, CHANGE_PATH, parts.query, ""))
