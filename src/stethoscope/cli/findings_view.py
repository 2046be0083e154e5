"""Findings as a person reads them in a terminal, and the --fail-on rule."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.text import Text

from stethoscope.cli.render import fmt
from stethoscope.records import SEVERITIES, Finding, severity_rank

STYLE = {"info": "cyan", "warning": "yellow", "error": "red", "critical": "bold white on red"}
FAIL_ON = ("never",) + SEVERITIES


def fails(findings: Iterable[Finding], fail_on: str) -> bool:
    """True when a finding is at or above `fail_on` (never: False)."""
    if fail_on == "never":
        return False
    floor = severity_rank(fail_on)
    return any(severity_rank(f.severity) >= floor for f in findings)


def _steps(f: Finding) -> str:
    if f.step is None:
        return ""
    if f.end_step is not None and f.end_step != f.step:
        return f" at step {f.step}–{f.end_step}"
    return f" at step {f.step}"


def _evidence(evidence: dict[str, Any], limit: int = 8) -> str:
    items = [(k, v) for k, v in evidence.items() if not isinstance(v, (dict, list)) or k == "batch_ids"]
    return ", ".join(f"{k}={_short(v)}" for k, v in items[:limit])


def _short(v: Any, width: int = 100) -> str:
    if isinstance(v, list):
        return str(v[:8])
    text = fmt(v)
    return text if len(text) <= width else text[: width - 1] + "…"


def shown(findings: Sequence[Finding], min_severity: str) -> list[Finding]:
    """The findings at or above `min_severity`, with the run's verdict and the notes on it (a finding of the
    verdict's type: the HF Trainer's train loss summed over accumulation steps beside "healthy")."""
    floor = severity_rank(min_severity)
    verdicts = {f.type for f in findings if f.evidence.get("verdict")}
    return [f for f in findings if severity_rank(f.severity) >= floor or f.type in verdicts]


def hidden_summary(hidden: Sequence[Finding]) -> str:
    """One line for the findings below --min-severity: 'info: 11 loss spikes (all recovered within 20 steps),
    1 eval sparse — details: --min-severity info'."""
    by_type: dict[str, list[Finding]] = {}
    for f in hidden:
        by_type.setdefault(f.type, []).append(f)
    parts = []
    for kind, group in sorted(by_type.items(), key=lambda kv: -len(kv[1])):
        plural = "s" if len(group) > 1 and kind.endswith(("spike", "stall", "drop")) else ""
        text = f"{len(group)} {kind.replace('_', ' ')}{plural}"
        back = [f.evidence.get("recovered_step", f.end_step) - f.step for f in group
                if f.evidence.get("recovered") in (True, "fully") and f.step is not None
                and isinstance(f.evidence.get("recovered_step", f.end_step), int)]
        if back and len(back) == len(group):
            text += f" ({'all ' if len(group) > 1 else ''}recovered within {max(back)} step{'s' * (max(back) != 1)})"
        parts.append(text)
    severities = sorted({f.severity for f in hidden}, key=severity_rank)
    return f"{'/'.join(severities)}: {', '.join(parts)} — details: --min-severity {severities[0]}"


def print_findings(con: Console, findings: Sequence[Finding], indent: str = "  ", min_severity: str = "info",
                   limit: int | None = None) -> None:
    """Findings at or above `min_severity` in full (at most `limit`), the rest as one summary line."""
    if not findings:
        con.print(f"{indent}[green]no problems found[/]")
        return
    visible = shown(findings, min_severity)
    hidden = [f for f in findings if all(f is not v for v in visible)]
    more = visible[limit:] if limit is not None else []
    visible = visible[:limit] if limit is not None else visible
    if not visible:
        con.print(Text(f"{indent}nothing at {min_severity} or above", style="green"))
    for f in visible:
        head = Text(indent)
        head.append(f" {f.severity.upper()} ", style=STYLE.get(f.severity, ""))
        head.append(f" {f.type}{_steps(f)}: ", style="bold")
        head.append(f.message)
        con.print(head)
        if f.evidence:
            con.print(Text(f"{indent}    evidence: {_evidence(f.evidence)}", style="dim"))
        for i, cause in enumerate(f.causes[:4]):
            con.print(f"{indent}    {'cause' if i == 0 else '     '}: {cause}", highlight=False, markup=False)
        for i, fix in enumerate([x for x in f.fixes if x][:4]):  # "": a cause with no fix of its own
            con.print(f"{indent}    {'fix' if i == 0 else '   '}  : {fix}", highlight=False, markup=False)
    if more:
        con.print(Text(f"{indent}+ {len(more)} more at {min_severity} or above (--json lists every finding)"))
    if hidden:
        con.print(Text(f"{indent}+ {hidden_summary(hidden)}", style="dim"))
