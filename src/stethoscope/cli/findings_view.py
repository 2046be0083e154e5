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


def print_findings(con: Console, findings: Sequence[Finding], indent: str = "  ") -> None:
    if not findings:
        con.print(f"{indent}[green]no problems found[/]")
        return
    for f in findings:
        head = Text(indent)
        head.append(f" {f.severity.upper()} ", style=STYLE.get(f.severity, ""))
        head.append(f" {f.type}{_steps(f)}: ", style="bold")
        head.append(f.message)
        con.print(head)
        if f.evidence:
            con.print(Text(f"{indent}    evidence: {_evidence(f.evidence)}", style="dim"))
        for i, cause in enumerate(f.causes[:4]):
            con.print(f"{indent}    {'cause' if i == 0 else '     '}: {cause}", highlight=False, markup=False)
        for i, fix in enumerate(f.fixes[:4]):
            con.print(f"{indent}    {'fix' if i == 0 else '   '}  : {fix}", highlight=False, markup=False)
