"""An LR jump is the root of the instability it caused (user trial, item 4: the LR change was listed after the
grad-norm jump it caused, as an `info` note below the warning).

`findings.links.link_causes` names the jump among the causes of an instability that starts within
`LR_WINDOW_STEPS` after an LR rise of `LR_UP_REL` or more. Here the incident is turned the right way round: the
LR change (at or before the symptoms' steps) becomes the incident, at the worst of its effects' severities, and
the loss/grad-norm jumps (with what they owned) become its symptoms. A divergence or a NaN among the effects
stays the incident (what ended the run), naming the jump as its first cause. The effects' words (how far the loss went,
whether it came back, a rollback it caused) stay in the incident's message and evidence."""

from __future__ import annotations

import dataclasses
from typing import Any

from stethoscope.findings.catalogue import DIVERGENCE, LOSS_SCALE_COLLAPSE, LR_SCHEDULE, NAN
from stethoscope.findings.links import LR_EFFECTS, LR_UP_REL, LR_WINDOW_STEPS
from stethoscope.records import Finding, severity_rank

# Effects that end a run stay their own incident, the jump its first cause; the jumps it caused that the run can
# come back from (the loss/grad-norm jumps, an update ratio) become the LR change's symptoms.
_RUN_ENDING = frozenset({DIVERGENCE, NAN, LOSS_SCALE_COLLAPSE})
_UNDO = "undo the LR change (check the resumed config / scheduler state for an override)"


def lr_roots(findings: list[Finding]) -> list[Finding]:
    """The findings with each LR rise that instabilities (at warning or above) followed made their incident."""
    out = list(findings)
    jumps = [f for f in out if f.type == LR_SCHEDULE and f.step is not None and _rise(f) >= LR_UP_REL
             and not f.evidence.get("lr_root")]
    for j in jumps:
        effects = [f for f in out if f.type in LR_EFFECTS and f.step is not None and severity_rank(f.severity) >= 1
                   and 0 <= f.step - j.step <= LR_WINDOW_STEPS and _names(f, j)]  # type: ignore[operator]
        if not effects or any(f.type in _RUN_ENDING for f in effects):
            continue  # a divergence or a NaN stays the incident (it names the jump as its first cause)
        root = _root(j, effects)
        out = [root if f is j else f for f in out if not any(f is e for e in effects)]
    return out


def _rise(f: Finding) -> float:
    rel = f.evidence.get("relative_change")
    return float(rel) if isinstance(rel, (int, float)) and not isinstance(rel, bool) else 0.0


def _names(effect: Finding, jump: Finding) -> bool:
    """The effect names this jump among its causes (`link_causes`, or the detector's own words)."""
    return any("LR jumped" in c and f"step {jump.step}" in c for c in effect.causes)


def _root(j: Finding, effects: list[Finding]) -> Finding:
    worst = max(effects, key=lambda f: (severity_rank(f.severity), -f.step))  # type: ignore[operator]
    symptoms: list[dict[str, Any]] = []
    for e in sorted(effects, key=lambda f: f.step):  # type: ignore[arg-type, return-value]
        for s in [{"type": e.type, "step": e.step}, *e.symptoms]:
            if not any(t.get("type") == s.get("type") and t.get("step") == s.get("step") for t in symptoms):
                symptoms.append(dict(s))
    head = j.message.split(", off the schedule's slope")[0]
    msg = f"{head}, and the run followed: {worst.message}"
    named = next(((c, x) for c, x in zip(worst.causes, worst.fixes) if "LR jumped" in c and x), None)
    pairs = [named or (f"the LR change at step {j.step} (x{1 + _rise(j):.3g}): too high for this stage", _UNDO)]
    pairs += [(c, x) for c, x in zip(j.causes, j.fixes) if "override" in c]  # not "a deliberate reset": it did harm
    pairs += [(c, x) for c, x in zip(worst.causes, worst.fixes) if "LR jumped" not in c]  # the jump's own words first
    seen: set[str] = set()
    pairs = [(c, x) for c, x in pairs if not (c in seen or seen.add(c))]
    ends = [e.end_step for e in effects]
    caused = [{"type": e.type, "step": e.step} for e in effects]
    ev = {**worst.evidence, **j.evidence, "lr_root": True, "caused": caused}
    return dataclasses.replace(j, severity=worst.severity, message=msg, evidence=ev, symptoms=symptoms,
                               end_step=None if None in ends else max(ends),  # type: ignore[type-var]
                               causes=[c for c, _ in pairs], fixes=[x for _, x in pairs])
