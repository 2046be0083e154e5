"""Generic webhook: the alert as one JSON object, POSTed."""

from __future__ import annotations

from typing import Any

from stethoscope.act.alert import Alert
from stethoscope.act.channels.http import JsonPost, check_url, safe_target


def alert_json(alert: Alert) -> dict[str, Any]:
    """The alert's fields plus its rendered title, text, onset and how to look."""
    return {**alert.to_dict(), "title": alert.title(), "text": alert.text(), "onset": alert.onset(),
            "look": alert.look(), "source": "stethoscope"}


class Webhook:
    """POSTs `alert_json(alert)` to `url`; `headers` may carry a token (kept out of every record)."""

    name = "webhook"

    def __init__(self, url: str, min_severity: str = "warning", headers: dict[str, str] | None = None,
                 timeout: float = 5.0) -> None:
        self.min_severity = min_severity
        self.target = safe_target(check_url(url))
        self.secrets = (url, *(headers or {}).values())
        self._post = JsonPost(url, timeout, headers)

    def send(self, alert: Alert) -> None:
        self._post.post(alert_json(alert))

    def abort(self) -> None:
        self._post.abort()
