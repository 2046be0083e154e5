"""Slack incoming webhook: Block Kit blocks with a plain-text fallback in `text`.

The webhook URL is the secret (anyone holding it can post): it is never shown, only `hooks.slack.com`.
Slack answers 200 "ok", or 4xx with a reason (`invalid_payload`, `no_service`, ...), 429 when throttled.
"""

from __future__ import annotations

from typing import Any

from stethoscope.act.alert import Alert
from stethoscope.act.channels.http import JsonPost, check_url, safe_target

_HEADER_MAX = 150  # Slack's limit for a header block's plain text
_TEXT_MAX = 2900  # a section's text may hold 3000 characters
_EMOJI = {"info": ":information_source:", "warning": ":warning:", "error": ":red_circle:",
          "critical": ":rotating_light:"}


def _esc(text: str) -> str:
    """Slack reads &, < and > as markup (`<!channel>` pings everyone): escape them."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def slack_payload(alert: Alert) -> dict[str, Any]:
    icon = ":white_check_mark:" if alert.kind == "resolve" else _EMOJI.get(alert.severity, "")
    lines = dict(alert.lines())
    body = f"*{_esc(alert.message)}*" + (f"\n_{_esc(alert.note)}_" if alert.note else "")
    fields = [{"type": "mrkdwn", "text": f"*{label}*\n{_esc(_cut(lines[label], 600))}"}
              for label in ("since", "severity", "rank", "numbers") if label in lines]
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _cut(f"{icon} {alert.title()}", _HEADER_MAX),
                                    "emoji": True}},
        {"type": "section", "text": {"type": "mrkdwn", "text": _cut(body, _TEXT_MAX)}, "fields": fields},
    ]
    advice = [f"*{label}:* {_esc(lines[label])}" for label in ("likely cause", "first fix") if label in lines]
    if advice:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _cut("\n".join(advice), _TEXT_MAX)}})
    look = f"run `{_esc(alert.run_dir or '-')}` · look: `{_esc(alert.look())}`"
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": _cut(look, _TEXT_MAX)}]})
    return {"text": _cut(alert.title(), _TEXT_MAX), "blocks": blocks}


class Slack:
    """Posts to a Slack incoming-webhook URL (keep it in an environment variable: `url_env`)."""

    name = "slack"

    def __init__(self, url: str, min_severity: str = "warning", timeout: float = 5.0) -> None:
        self.min_severity = min_severity
        self.target = safe_target(check_url(url), keep_path=False)
        self.secrets = (url,)
        self._post = JsonPost(url, timeout)

    def send(self, alert: Alert) -> None:
        self._post.post(slack_payload(alert))

    def abort(self) -> None:
        self._post.abort()
