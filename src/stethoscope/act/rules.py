"""Rules: findings (already folded into incidents) become alerts, one incident at a time.

* dedup by (type, rank): while an alert of a type is open on this rank, another finding of that type
  is part of it (a NaN that stays NaN pages once, not once per step); the follow-ups of a finding
  (same source, type and step) and a root that claims an alerted symptom update the same alert;
* a channel gets an alert at or above its `min_severity`; the rules' own `min_severity` is the floor;
* cooldown: a new incident of a type paged less than `cooldown_s` ago is counted, not paged, unless
  it is critical (the run is at stake: a page too many costs less than a missed one; the catalogue's
  `resolve_steps` keeps a flapping NaN from paging per step) -- and then once: a critical that comes back
  again inside the cooldown of that repeat (a NaN flapping every 25 steps) is counted, not paged;
* run-wide types (a hang stalls every rank) page once across ranks: the rank that claims the incident
  (`act.claims`) pages, the others keep it open silently;
* escalation: an incident whose severity rises, or that is still open `escalate_after_s` after it
  was paged, is sent again one level up (never past critical): as `escalate` to the channels already
  told (a new message on Slack or email), as `trigger` to a channel it reaches for the first time, and
  to no channel that escalates by itself (`escalates_itself`: PagerDuty's escalation policy pages the
  next person while nobody acknowledges);
* an alert resolves when every finding in it is over (it recovered, or turned out a passing blip),
  and the run's end sends `stop` for what is still open; both go only to the channels paged about it.

State is `state_dict()`-able so a resumed run does not page again for the incident it already paged.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from stethoscope.act.alert import Alert, headline_numbers
from stethoscope.act.claims import claim
from stethoscope.findings.catalogue import run_wide
from stethoscope.findings.incidents import finding_key
from stethoscope.records import SEVERITIES, Finding, severity_rank

_RUN_WIDE_WINDOW_S = 60.0  # ranks of one run-wide incident see it this close together, when it says no better

Delivery = tuple[int, Alert]
"""(channel index, alert): one message for one channel."""


@dataclass(frozen=True, slots=True)
class RuleConfig:
    """How findings become alerts. Validated on creation (ValueError names the field)."""

    min_severity: str = "warning"
    """No alert below this severity, on any channel (a channel's own `min_severity` may be higher)."""
    cooldown_s: float = 600.0
    """Seconds after paging a type during which a new incident of that type is counted, not paged (a critical
    one always pages)."""
    escalate_after_s: float | None = 1800.0
    """An incident still open this long after it was paged is sent again one level up; None: never."""
    resolve: bool = True
    """Send a message when an incident clears (and `stop` when the run ends with it open)."""

    def __post_init__(self) -> None:
        if self.min_severity not in SEVERITIES:
            raise ValueError(f"rules.min_severity must be one of {', '.join(SEVERITIES)}, got {self.min_severity!r}")
        if not isinstance(self.cooldown_s, (int, float)) or self.cooldown_s < 0:
            raise ValueError(f"rules.cooldown_s must be a number >= 0, got {self.cooldown_s!r}")
        if self.escalate_after_s is not None and (not isinstance(self.escalate_after_s, (int, float))
                                                  or self.escalate_after_s <= 0):
            raise ValueError(f"rules.escalate_after_s must be a number > 0 (or absent), got {self.escalate_after_s!r}")
        if not isinstance(self.resolve, bool):
            raise ValueError(f"rules.resolve must be true or false, got {self.resolve!r}")


@dataclass(slots=True)
class _Open:
    """An incident that was alerted and has not ended."""

    key: str
    type: str
    severity: str
    step: int | None
    onset_time: float | None
    paged_at: float
    lead: str = ""
    keys: list[str] = field(default_factory=list)
    active: list[str] = field(default_factory=list)  # member findings not over yet
    notified: list[int] = field(default_factory=list)
    finding: dict[str, Any] | None = None
    held_by: int | None = None  # a run-wide incident another rank pages


class AlertRules:
    """Turns a rank's stream of findings into deliveries (see the module docstring)."""

    def __init__(self, channel_severities: list[str], config: RuleConfig | None = None, rank: int = 0,
                 run_dir: str = "", advise: Callable[[Finding], Finding] | None = None,
                 escalates_itself: list[bool] | None = None) -> None:
        self.config = config or RuleConfig()
        self.channel_severities = list(channel_severities)
        self.escalates_itself = list(escalates_itself or [False] * len(self.channel_severities))
        self.rank = rank
        self.run_dir = run_dir
        self.advise = advise
        self.open: list[_Open] = []
        self.last_paged: dict[str, float] = {}
        self.repeated: dict[str, float] = {}  # when a critical of the type last paged inside the cooldown
        self.suppressed = 0
        name = run_dir.rstrip("/").rsplit("/", 1)[-1][:80]
        self._tag = f"stethoscope/{name}-{hashlib.sha1(run_dir.encode()).hexdigest()[:8]}"  # unique per run

    # -- the stream ---------------------------------------------------------------------------------
    def on_findings(self, findings: list[Finding], now: float,
                    onset_time: Callable[[int | None], float | None] | None = None) -> list[Delivery]:
        out: list[Delivery] = []
        for f in findings:
            out += self._on_finding(f, now, onset_time)
        return out

    def tick(self, now: float) -> list[Delivery]:
        """Escalate incidents still open `escalate_after_s` after they were paged."""
        after = self.config.escalate_after_s
        out: list[Delivery] = []
        for a in self.open:
            if after is None or now - a.paged_at < after or a.severity == SEVERITIES[-1] or not a.finding:
                continue
            a.paged_at = now
            severity = SEVERITIES[severity_rank(a.severity) + 1]
            out += self._escalate(a, severity, now, f"still open after {_duration(after)}")
        return out

    def run_ended(self, status: str, last_step: int | None, now: float) -> list[Delivery]:
        """The run stopped: one `stop` message per open incident, to the channels paged about it."""
        out: list[Delivery] = []
        if self.config.resolve:
            for a in self.open:
                note = f"the run stopped ({status}) at step {last_step} with this incident still open"
                out += [(ch, self._alert("stop", a, now, note)) for ch in a.notified]
        self.open = []
        return out

    # -- one finding ------------------------------------------------------------------------------
    def _on_finding(self, f: Finding, now: float, onset_time: Any) -> list[Delivery]:
        key = finding_key(f)
        if f.evidence.get("withdrawn"):  # claimed by a root: the root's findings now update this alert
            a = self._by_key(key)
            if a is not None and f.evidence.get("folded_into"):
                root = str(f.evidence["folded_into"])
                a.active = [root if k == key else k for k in a.active]
                if a.lead == key:
                    a.lead = root
                a.keys.append(root)
            return []
        a = self._by_key(key) or self._by_type(f.type)
        if a is not None:
            return self._update(a, f, key, now)
        if severity_rank(f.severity) < severity_rank(self.config.min_severity):
            return []
        last = self.last_paged.get(f.type)
        if last is not None and now - last < self.config.cooldown_s:
            again = self.repeated.get(f.type)
            if f.severity != SEVERITIES[-1] or (again is not None and now - again < self.config.cooldown_s):
                self.suppressed += 1
                return []
            self.repeated[f.type] = now
        onset = onset_time(f.step) if onset_time is not None else None
        a = _Open(key, f.type, f.severity, f.step, onset, now, key, [key], [key], [], f.to_dict())
        if run_wide(f.type):
            a.held_by = self._claim(f, onset, now)
        if a.held_by is not None:  # another rank pages it: kept open here so that it does not page again
            if not _over(f):
                self.open.append(a)
            return []
        self.last_paged[f.type] = now
        channels = self._channels_for(f.severity)
        a.notified = channels
        note = f"already over by step {f.end_step}" if _over(f) else ""
        if not _over(f):
            self.open.append(a)
        return [(ch, self._alert("trigger", a, now, note)) for ch in channels]

    def _update(self, a: _Open, f: Finding, key: str, now: float) -> list[Delivery]:
        if key not in a.keys:  # another finding of the type while this one is open: part of it
            a.keys.append(key)
            a.active.append(key)
        if key == a.lead:
            a.finding = f.to_dict()
        if _over(f):
            if key in a.active:
                a.active.remove(key)
            if a.active:
                return []
            self.open.remove(a)
            note = f"over by step {f.end_step}: it passed (transient)" if f.evidence.get("transient") else \
                f"resolved at step {f.end_step}"
            return [(ch, self._alert("resolve", a, now, note)) for ch in a.notified] if self.config.resolve else []
        if key not in a.active:
            a.active.append(key)
        if severity_rank(f.severity) > severity_rank(a.severity):
            return self._escalate(a, f.severity, now, f"now {f.severity}")
        return []

    def _escalate(self, a: _Open, severity: str, now: float, note: str) -> list[Delivery]:
        a.severity = severity
        if a.held_by is not None:
            return []
        told = set(a.notified)
        channels = self._channels_for(severity)
        a.notified = sorted(told | set(channels))
        out = []
        for ch in channels:
            if ch not in told:  # the first this channel hears of it: a page, whatever the others got
                out.append((ch, self._alert("trigger", a, now, f"escalated: {note}")))
            elif not self.escalates_itself[ch]:
                out.append((ch, self._alert("escalate", a, now, note)))
        return out

    def _claim(self, f: Finding, onset: float | None, now: float) -> int | None:
        """Another rank that pages this run-wide incident, or None (this rank pages it): ranks see one incident
        within its timeout of each other (a hang's `since` and `timeout_s`; else the step's time and a minute)."""
        since = f.evidence.get("since", onset if onset is not None else now)
        window = f.evidence.get("timeout_s") or _RUN_WIDE_WINDOW_S
        return claim(self.run_dir, f.type, f.step, self.rank, float(since), float(window))

    def _channels_for(self, severity: str) -> list[int]:
        r = severity_rank(severity)
        return [i for i, s in enumerate(self.channel_severities) if severity_rank(s) <= r]

    def _by_key(self, key: str) -> _Open | None:
        return next((a for a in self.open if key in a.keys), None)

    def _by_type(self, type_: str) -> _Open | None:
        return next((a for a in self.open if a.type == type_), None)

    def _alert(self, kind: str, a: _Open, now: float, note: str = "") -> Alert:
        f = Finding.from_dict(a.finding) if a.finding else Finding(a.type, a.severity, a.step, a.type)
        if self.advise is not None:
            f = self.advise(f)
        # the key stays the first finding's (PagerDuty's dedup_key); the type shown is the lead finding's; a
        # run-wide incident's key names no rank (the ranks' triggers fold into one PagerDuty alert)
        where = "" if run_wide(a.type) else f"/r{self.rank}"
        return Alert(kind=kind, key=f"{self._tag}{where}/{a.type}@{a.step}", type=f.type, severity=a.severity,
                     step=a.step, rank=self.rank, message=f.message, onset_time=a.onset_time, end_step=f.end_step,
                     evidence=headline_numbers(f), cause=f.causes[0] if f.causes else None,
                     fix=f.fixes[0] if f.fixes else None, run_dir=self.run_dir, note=note, time=now)

    # -- state ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"open": [dataclasses.asdict(a) for a in self.open], "last_paged": dict(self.last_paged),
                "repeated": dict(self.repeated), "suppressed": self.suppressed}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.open = [_Open(**d) for d in state.get("open", [])]
        self.last_paged = dict(state.get("last_paged", {}))
        self.repeated = dict(state.get("repeated", {}))
        self.suppressed = int(state.get("suppressed", 0))


def _over(f: Finding) -> bool:
    """The finding says its incident ended: it recovered, or it was a passing blip after all."""
    if f.evidence.get("transient") or (f.evidence.get("withdrawn") and not f.evidence.get("folded_into")):
        return True
    return f.end_step is not None and f.evidence.get("recovered") in (True, "fully")


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"
