"""Incidents: one root-cause finding that owns the symptoms inside its span, streaming.

A person on call wants one incident ("divergence from step 602: loss spike at 602, grad explosion at
611, NaN at 700") and a new warning only for something new. `IncidentBook.process` sits between
the detectors and everything downstream (store, alerts, diagnose), live and after the fact alike:

* a root finding (a catalogue type with `symptoms`) opens an incident at its onset; follow-ups
  (same source, type and step) update it; it stays open until its finding says the loss came back
  (fully, or slowly: a long spike undone by its end step), so a run that never came back keeps owning the
  instabilities that follow, and one that did owns nothing after it (a NaN 1,500 steps later is news);
* a finding an open incident owns (its type is a symptom of the root, its step inside the span or
  up to `lead_steps` before the onset) is not reported: it becomes a symptom of the root, which is
  re-emitted with the symptom in `symptoms` and its severity raised to the worst symptom's;
* a symptom reported just before its root was known is withdrawn (re-emitted with
  `evidence["withdrawn"]`, which the pipeline drops) and claimed.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from stethoscope.findings.catalogue import is_root, owns
from stethoscope.records import Finding, severity_rank

_RECENT = 64  # emitted findings a late-confirmed root may still claim
_KEPT = 256  # folded keys remembered (their follow-ups are dropped too)
_INCIDENTS = 64
_CAME_BACK = (True, "fully", "slowly")  # `evidence["recovered"]` of a root over at its end_step


def finding_key(f: Finding) -> str:
    """The identity a follow-up shares with the finding it supersedes."""
    return f"{f.source}|{f.type}|{f.step}"


@dataclass(slots=True)
class Symptom:
    type: str
    step: int | None
    severity: str
    key: str
    finding: dict[str, Any] | None = None  # the finding it was, released if its root turns out a note


@dataclass(slots=True)
class Incident:
    """A root-cause finding and the symptoms it owns."""

    key: str
    type: str
    step: int
    severity: str  # the root's own severity, before symptoms raise it
    message: str = ""  # the root's own message, before the symptom summary
    open: bool = True
    end_step: int | None = None
    symptoms: list[Symptom] = field(default_factory=list)
    root: Finding | None = None

    def covers(self, f: Finding, lead_steps: int) -> bool:
        if f.step is None or not owns(self.type, f.type) or self.severity == "info":
            return False  # a note (a harmless blip, an expected jump) owns nothing
        if f.step < self.step - lead_steps:
            return False
        if f.step < self.step and f.end_step is not None and f.end_step < self.step \
                and f.evidence.get("recovered") in _CAME_BACK:
            return False  # over before the root began: an incident of its own
        return self.open or self.end_step is None or f.step <= self.end_step

    def add(self, f: Finding, key: str) -> bool:
        """Record a symptom; True when it is news (a type or severity the root did not show yet)."""
        if any(s.key == key for s in self.symptoms):
            return False
        news = not any(s.type == f.type for s in self.symptoms) or severity_rank(f.severity) > severity_rank(
            self.worst())
        self.symptoms.append(Symptom(f.type, f.step, f.severity, key, f.to_dict()))
        return news

    def worst(self) -> str:
        ranks = [self.severity] + [s.severity for s in self.symptoms]
        return max(ranks, key=severity_rank)

    def decorated(self) -> Finding:
        """The root finding with its symptoms listed, its severity raised to the worst symptom's."""
        if self.root is None:
            raise ValueError(f"incident {self.key} has no root finding yet")
        f = dataclasses.replace(self.root, evidence=dict(self.root.evidence))
        shown = [s for s in sorted(self.symptoms, key=lambda s: (s.step is None, s.step)) if s.type != self.type]
        f.symptoms = [{"type": s.type, "step": s.step} for s in shown]
        f.severity = self.worst()
        if shown:
            f.evidence["symptoms"] = len(shown)
            f.message = f"{self.message}; symptoms: {_summary(shown)}"
        return f


def _summary(symptoms: list[Symptom]) -> str:
    """'loss spike at 602, grad explosion x3 (611-940), nan at 700', one part per type, in order of onset."""
    by_type: dict[str, list[int | None]] = {}
    for s in symptoms:
        by_type.setdefault(s.type, []).append(s.step)
    parts = []
    for name, steps in by_type.items():
        label = name.replace("_", " ")
        if len(steps) == 1:
            parts.append(f"{label} at {steps[0]}")
        else:
            known = [x for x in steps if x is not None]
            span = f" ({min(known)}-{max(known)})" if known else ""
            parts.append(f"{label} x{len(steps)}{span}")
    return ", ".join(parts)


class IncidentBook:
    """Folds findings into incidents as they stream by (see the module docstring)."""

    def __init__(self, lead_steps: int = 50) -> None:
        self.lead_steps = lead_steps
        self.incidents: dict[str, Incident] = {}
        self._recent: deque[Finding] = deque(maxlen=_RECENT)
        self._folded: deque[str] = deque(maxlen=_KEPT)

    def process(self, found: list[Finding]) -> list[Finding]:
        out: list[Finding] = []
        for f in found:
            key = finding_key(f)
            if key in self._folded:
                self._refresh(f, key)  # a follow-up of a symptom already owned: its latest word, for a release
                continue
            if key in self.incidents:
                out.extend(self._root(f, key))
                continue
            owner = self._owner(f)
            if owner is not None:
                self._folded.append(key)
                if owner.add(f, key) and owner.root is not None:
                    out.append(owner.decorated())
                continue
            if is_root(f.type) and f.step is not None:
                out.extend(self._root(f, key))
                continue
            self._recent.append(f)
            out.append(f)
        return out

    def _owner(self, f: Finding) -> Incident | None:
        for inc in self.incidents.values():
            if inc.covers(f, self.lead_steps):
                return inc
        return None

    def _root(self, f: Finding, key: str) -> list[Finding]:
        inc = self.incidents.get(key)
        if inc is None:
            inc = self.incidents[key] = Incident(key, f.type, f.step, f.severity)  # type: ignore[arg-type]
            while len(self.incidents) > _INCIDENTS:
                self.incidents.pop(next(iter(self.incidents)))
        inc.root, inc.severity, inc.message = f, f.severity, f.message
        if f.severity == "info" and inc.symptoms:  # the root was a note after all (an expected jump at a
            return self._release(inc, f)           # restart): what it had claimed is news of its own again
        if f.end_step is not None and f.evidence.get("recovered") in _CAME_BACK:
            inc.open, inc.end_step = False, f.end_step
        out = []
        for other in list(self.incidents.values()):  # a smaller incident inside this one (a spike that diverged)
            if other is not inc and other.root is not None and inc.covers(other.root, self.lead_steps):
                del self.incidents[other.key]
                self._folded.append(other.key)
                inc.add(other.root, other.key)
                for sym in other.symptoms:
                    if owns(inc.type, sym.type) and all(x.key != sym.key for x in inc.symptoms):
                        inc.symptoms.append(sym)
                withdrawn = other.decorated()
                out.append(dataclasses.replace(withdrawn, evidence={**withdrawn.evidence, "withdrawn": True,
                                                                    "folded_into": key}))
        for g in list(self._recent):  # symptoms reported before their root was confirmed
            if inc.covers(g, self.lead_steps):
                self._recent.remove(g)
                gkey = finding_key(g)
                self._folded.append(gkey)
                inc.add(g, gkey)
                out.append(dataclasses.replace(g, evidence={**g.evidence, "withdrawn": True, "folded_into": key}))
        out.append(inc.decorated())
        return out

    def _refresh(self, f: Finding, key: str) -> None:
        """Keep the latest word of an owned symptom (a divergence its detector later took back as a slow comeback):
        a root that turns out a note releases that, not the symptom as it was first reported."""
        for inc in self.incidents.values():
            for sym in inc.symptoms:
                if sym.key == key and sym.finding is not None:
                    sym.finding, sym.severity = f.to_dict(), f.severity
                    return

    def _release(self, inc: Incident, f: Finding) -> list[Finding]:
        out = [f]
        for sym in inc.symptoms:
            if sym.finding is None:
                continue
            if sym.key in self._folded:
                self._folded.remove(sym.key)
            g = Finding.from_dict(sym.finding)
            if g.evidence.pop("folded_into", None) is not None:  # withdrawn by the book, not by its own detector
                g.evidence.pop("withdrawn", None)
            self._recent.append(g)
            out.append(g)
        inc.symptoms = []
        return out

    # -- state ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        incidents = []
        for inc in self.incidents.values():
            d = dataclasses.asdict(inc)
            d["root"] = inc.root.to_dict() if inc.root is not None else None
            incidents.append(d)
        return {"incidents": incidents, "recent": [f.to_dict() for f in self._recent], "folded": list(self._folded)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.incidents = {}
        for d in state.get("incidents", []):
            d = dict(d)
            root = d.pop("root", None)
            symptoms = [Symptom(**s) for s in d.pop("symptoms", [])]
            inc = Incident(**d, symptoms=symptoms, root=Finding.from_dict(root) if root else None)
            self.incidents[inc.key] = inc
        self._recent = deque((Finding.from_dict(f) for f in state.get("recent", [])), maxlen=_RECENT)
        self._folded = deque(state.get("folded", []), maxlen=_KEPT)


def with_rollbacks(findings: list[Finding], actions: list[tuple[int | None, dict[str, Any]]]) -> list[Finding]:
    """The incidents that made the run roll back, saying so: `actions` are the recovery's records (step, data)
    in order (`rollback`: its number, onset, type, restored step, skipped batches, LR factor; `recovered`;
    `gave_up`). An incident the findings lack (its finding was not recorded) is added from the rollback's
    own reason, so a run that rolled back never reads as clean."""
    from stethoscope.findings.catalogue import CATALOGUE
    from stethoscope.findings.own_actions import rollback_lr_cuts

    out = list(findings)
    for step, d in actions:
        if d.get("action") != "rollback" or not isinstance(d.get("onset"), int):
            continue
        i = next((i for i, f in enumerate(out) if f.step == d["onset"] and f.type == d.get("type")
                  and not f.evidence.get("withdrawn")), None)
        if i is None:
            if d.get("type") not in CATALOGUE:
                continue
            out.append(Finding(str(d["type"]), "warning", d["onset"], str(d.get("reason") or "the run rolled back"),
                               source="recovery"))
            i = len(out) - 1
        out[i] = _rolled_back(out[i], d, [a for s, a in actions if a.get("rollback") == d.get("rollback")
                                          and a.get("action") in ("recovered", "gave_up")], step)
    return rollback_lr_cuts(out, actions)


def _rolled_back(f: Finding, d: dict[str, Any], outcomes: list[dict[str, Any]], step: int | None) -> Finding:
    n = d.get("rollback")
    base = f.message.split("; rolled back to step")[0] if f.evidence.get("rolled_back") == n else f.message
    skip = d.get("skip")
    what = [f"batches {skip[0]}-{skip[1]} skipped"] if isinstance(skip, list) and len(skip) == 2 else []
    if isinstance(d.get("lr_factor"), (int, float)):
        what.append(f"LR x{d['lr_factor']:.3g}")
    msg = f"{base}; the run rolled back to step {d.get('restored')} because of it (rollback {n} at step {step}" + \
        (f": {', '.join(what)})" if what else ")")
    ev = {**f.evidence, "rollback": n, "rolled_back": n, "rolled_back_to": d.get("restored"), "rollback_step": step}
    end = f.end_step if f.end_step is not None else step
    for o in outcomes[-1:]:
        if o.get("action") == "recovered":
            ev["rollback_outcome"] = "recovered"
            loss, before = o.get("loss"), o.get("level_before")
            msg += "; recovered" + (f" (loss {loss:.4g}, {before:.4g} before the incident)"
                                    if isinstance(loss, float) and isinstance(before, float) else "")
        else:
            ev["rollback_outcome"] = "gave_up"
            msg += f"; recovery gave up: {o.get('reason') or 'no more rollbacks'}"
    return dataclasses.replace(f, message=msg, evidence=ev, end_step=end)
