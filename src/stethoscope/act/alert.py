"""An alert: what a person on call reads about one incident, in every channel's words.

One incident gives a channel at most a `trigger`, an `escalate` when it got worse or persisted, and one
last message: `resolve` when it cleared, `stop` when the run ended with it still open. `key` is stable
for the incident (PagerDuty's `dedup_key`, with no rank in it for a run-wide type), so a `resolve`
closes what the `trigger` opened. A channel that hears of an incident first when it escalates gets it
as a `trigger`; Slack, email and webhooks show an `escalate` or a `stop` as a new message, PagerDuty
escalates by its own policy and records a `stop` as a change event (channels/pagerduty.py).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from stethoscope.records import Finding

KINDS = ("trigger", "escalate", "resolve", "stop")

_HEADLINE_ITEMS = 5
_SKIPPED_EVIDENCE = frozenset({"withdrawn", "folded_into", "batch_ids", "steps", "symptoms"})


@dataclass(slots=True)
class Alert:
    """One message about one incident. Holds no secret: it is what channels send and the run records."""

    kind: str
    key: str
    type: str
    severity: str
    step: int | None
    rank: int
    message: str
    onset_time: float | None = None
    end_step: int | None = None
    evidence: dict[str, str] = field(default_factory=dict)
    cause: str | None = None
    fix: str | None = None
    run_dir: str = ""
    note: str = ""
    time: float = 0.0
    basis: str = ""
    """What the text was rendered from: `run_incidents` (the run's incidents, as `diagnose` shows them), or
    `streaming finding: <why>` when that could not be computed in time (act/truth.py)."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"alert kind must be one of {KINDS}, got {self.kind!r}")

    @property
    def is_final(self) -> bool:
        return self.kind in ("resolve", "stop")

    def title(self) -> str:
        """One line: '[CRITICAL] nan at step 200 on rank 0 (runs/exp1)'."""
        what = f"{self.type.replace('_', ' ')} at step {self.step} on rank {self.rank}"
        run = f" ({self.run_dir})" if self.run_dir else ""
        label = {"trigger": self.severity.upper(), "escalate": f"{self.severity.upper()}, ESCALATED",
                 "resolve": "RESOLVED", "stop": "RUN STOPPED"}[self.kind]
        return f"[{label}] {what}{run}"

    def look(self) -> str:
        return f"stethoscope diagnose {self.run_dir}" if self.run_dir else "stethoscope diagnose RUN_DIR"

    def onset(self) -> str:
        if self.onset_time is None:
            return f"step {self.step}"
        stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.onset_time))
        return f"step {self.step}, {stamp}"

    def lines(self) -> list[tuple[str, str]]:
        """(label, text) pairs every channel lays out its own way."""
        out = [("what", self.message), ("since", self.onset()), ("severity", self.severity), ("rank", str(self.rank))]
        if self.note:
            out.insert(1, ("status", self.note))
        if self.evidence:
            out.append(("numbers", ", ".join(f"{k}={v}" for k, v in self.evidence.items())))
        if self.cause:
            out.append(("likely cause", self.cause))
        if self.fix:
            out.append(("first fix", self.fix))
        out.append(("run", self.run_dir or "-"))
        out.append(("look", self.look()))
        return out

    def text(self) -> str:
        """Plain text: the title, then one `label: text` line each."""
        return "\n".join([self.title()] + [f"{label}: {text}" for label, text in self.lines()])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Alert:
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in names})


def headline_numbers(f: Finding) -> dict[str, str]:
    """The finding's evidence as a few short `name: value` strings (scalars first, lists left out)."""
    out: dict[str, str] = {}
    for name, value in f.evidence.items():
        if name in _SKIPPED_EVIDENCE:
            continue
        shown = _show(value)
        if shown is not None:
            out[name] = shown
        if len(out) >= _HEADLINE_ITEMS:
            break
    return out


def _show(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None if value is None else str(value).lower()
    if isinstance(value, (int, float)):
        return _number(value)
    if isinstance(value, str):
        return value if len(value) <= 40 else value[:37] + "..."
    if isinstance(value, dict) and 0 < len(value) <= 3:
        parts = [f"{k} {_show(v)}" for k, v in value.items() if _show(v) is not None]
        return ", ".join(parts) or None
    if isinstance(value, (list, tuple)) and 0 < len(value) <= 3 and all(isinstance(v, str) for v in value):
        return ", ".join(value)
    return None


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return str(value)
    return f"{value:.4g}"
