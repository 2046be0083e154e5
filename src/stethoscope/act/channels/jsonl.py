"""An append-only JSON Lines file: one alert a line (for scripts, or a log shipper to pick up)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from stethoscope.act.alert import Alert
from stethoscope.act.channels.base import DeliveryError
from stethoscope.act.channels.webhook import alert_json
from stethoscope.records import json_safe


class JsonlFile:
    """Appends `alert_json(alert)` to `path` (created with its folder), one line each."""

    name = "jsonl"

    def __init__(self, path: str | os.PathLike[str], min_severity: str = "warning") -> None:
        self.path = Path(path)
        self.min_severity = min_severity
        self.target = str(self.path)

    def send(self, alert: Alert) -> None:
        line = json.dumps(json_safe(alert_json(alert)), ensure_ascii=False) + "\n"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line)
        except OSError as exc:
            raise DeliveryError(f"{type(exc).__name__}: {exc}", retryable=False) from None
