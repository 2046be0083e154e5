"""The one findings pipeline: what the detectors said, settled into what a person reads.

`diagnose.stored.run_incidents` (what `show`, `diagnose`, `compare`, `watch`, `report` and the dashboard
print) and `diagnose_run` on a foreign log go through `combine` (recorded and replayed findings) and
`finalise`: follow-ups merged (the last word per finding wins,
escalations replace what they escalated), withdrawn claims and transient slowdowns dropped (they were
live-only news), one-step grad-norm blips folded into one note, causes linked across findings (an
instability right after an LR jump names it), advice applied, most severe first.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable

from stethoscope.findings.catalogue import ESCALATIONS, GRAD_SPIKE
from stethoscope.findings.catalogue import is_root
from stethoscope.findings.incidents import Incident, finding_key
from stethoscope.findings.links import link_causes
from stethoscope.findings.lr_roots import lr_roots
from stethoscope.records import Finding, severity_rank

_BLIP_EXAMPLES = 20


def merge_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Apply the supersede rule: the last finding per key wins, in the order keys first appeared;
    an escalation replaces the finding it escalated (same source and step)."""
    merged: dict[str, Finding] = {}
    for f in findings:
        merged[finding_key(f)] = f
    for f in list(merged.values()):
        lower = ESCALATIONS.get(f.type)
        if lower is not None:
            merged.pop(f"{f.source}|{lower}|{f.step}", None)
    return list(merged.values())


def combine(recorded: Iterable[Finding], replayed: Iterable[Finding], lead_steps: int = 50) -> list[Finding]:
    """A stored run's findings from its two sources: what its live detectors recorded (they saw every step,
    the ones a rollback abandoned too, with the run's own thresholds) and what a replay of its kept metrics
    finds. The recorded word wins; a replayed finding is added only where none speaks for it: no recorded
    finding of its type within `lead_steps` of its span (the same event, seen by detectors with another
    history: the live ones saw the steps a rollback abandoned); one a recorded incident owns becomes its
    symptom (raising its severity, as the live incident book would have)."""
    out = merge_findings(recorded)
    roots = {i: Incident(finding_key(f), f.type, f.step, f.severity, open=f.end_step is None, end_step=f.end_step)
             for i, f in enumerate(out) if is_root(f.type) and f.step is not None and not f.evidence.get("withdrawn")}
    spans = [(f.type, *_span(f)) for f in out if f.step is not None]
    keys = {finding_key(f) for f in out}
    for f in merge_findings(replayed):
        lo, hi = _span(f)
        if finding_key(f) in keys or (f.step is not None and any(
                t == f.type and a - lead_steps <= hi and lo <= b + lead_steps for t, a, b in spans)):
            continue
        owner = next((i for i, r in roots.items() if r.covers(f, lead_steps)), None)
        if owner is None:
            out.append(f)
        else:
            out[owner] = _with_symptom(out[owner], f)
    return out


def _with_symptom(root: Finding, f: Finding) -> Finding:
    if any(s.get("type") == f.type and s.get("step") == f.step for s in root.symptoms):
        return root
    label = f"{f.type.replace('_', ' ')} at {f.step}"
    msg = f"{root.message}, {label}" if "; symptoms: " in root.message else f"{root.message}; symptoms: {label}"
    worst = max(root.severity, f.severity, key=severity_rank)
    return dataclasses.replace(root, severity=worst, message=msg, evidence=dict(root.evidence),
                               symptoms=[*root.symptoms, {"type": f.type, "step": f.step}])


def _span(f: Finding) -> tuple[float, float]:
    if f.step is None:
        return -math.inf, math.inf
    return f.step, f.end_step if f.end_step is not None and f.end_step >= f.step else f.step


def settle(found: Iterable[Finding]) -> list[Finding]:
    """Follow-ups merged, withdrawn and transient findings dropped, grad-norm blips folded."""
    merged = [f for f in merge_findings(found) if not f.evidence.get("withdrawn") and not f.evidence.get("transient")]
    return fold_blips(merged)


def finalise(found: Iterable[Finding], advise: Callable[[Finding], Finding] | None = None,
             keep: Callable[[Finding], bool] | None = None) -> list[Finding]:
    """`settle`, then drop what `keep` rejects, link causes, `advise` each finding, rank them."""
    findings = [f for f in settle(found) if keep is None or keep(f)]
    link_causes(findings)
    if advise is not None:
        findings = [advise(f) for f in findings]
    return ranked(lr_roots(findings))


def ranked(findings: list[Finding]) -> list[Finding]:
    """Most severe first, then by step (findings without a step last)."""
    return sorted(findings, key=lambda f: (-severity_rank(f.severity), f.step if f.step is not None else math.inf))


def fold_blips(findings: list[Finding]) -> list[Finding]:
    """Known non-problem: one-step grad-norm blips that recovered. Many become one info finding."""
    blips = [f for f in findings if f.type == GRAD_SPIKE and f.evidence.get("recovered") is True
             and f.end_step is not None and f.step is not None and f.evidence.get("records", 1) <= 2]
    if len(blips) < 2:
        return findings
    rest = [f for f in findings if not any(f is b for b in blips)]
    worst = max(blips, key=lambda f: f.evidence.get("ratio", 0.0))
    steps = sorted(b.step for b in blips)  # type: ignore[type-var]
    msg = (f"{len(blips)} one-step grad-norm blips that recovered at once (the largest x{worst.evidence['ratio']:.3g} "
           f"at step {worst.step}); harmless while the loss does not follow")
    ev = {"blips": len(blips), "largest_ratio": worst.evidence.get("ratio"), "largest_step": worst.step,
          "steps": steps[:_BLIP_EXAMPLES], "non_problem": "grad_blips"}
    rest.append(Finding(GRAD_SPIKE, "info", worst.step, msg, end_step=worst.end_step, evidence=ev, source="spike"))
    return rest
