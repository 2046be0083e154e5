"""The report's facts about a run: the header's key figures (status, last step, steps logged, duration, findings
as `show` counts them) and the run-metadata table, from a `ReportInput`'s series, findings and metadata. Used by
`report.html` (the page) and by `compare`, the dashboard and `diagnose --json`'s summary (`flatten`, `logged_steps`)."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from stethoscope import records as r
from stethoscope.records import Finding, json_safe

if TYPE_CHECKING:
    from stethoscope.report.html import ReportInput

Series = tuple[list[int], list[float]]


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def flatten(meta: dict[str, object], prefix: str = "") -> dict[str, str]:
    """Nested metadata as dotted keys → display strings (unix times under `*_time` keys as UTC)."""
    out: dict[str, str] = {}
    for key, value in meta.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = _display(name, value)
    return out


def _display(name: str, value: object) -> str:
    if isinstance(value, str):
        return value
    if name.endswith("_time") and isinstance(value, (int, float)) and 1e8 < value < 1e11:
        return datetime.fromtimestamp(value, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return json.dumps(json_safe(value), ensure_ascii=False, default=str)


_META_GROUPS = ("config", "git", "host", "versions")


def _meta_group(key: str) -> str:
    head = key.split(".", 1)[0]
    return head if head in _META_GROUPS else "run"


def meta_table(meta: dict[str, object]) -> str:
    flat = flatten(meta)
    if not flat:
        return '<div class="st-none">No run metadata recorded.</div>'
    order = {g: i for i, g in enumerate(("run",) + _META_GROUPS)}
    rows, group = [], None
    for key in sorted(flat, key=lambda k: (order[_meta_group(k)], k)):
        if _meta_group(key) != group:
            group = _meta_group(key)
            rows.append(f'<tr class="st-group"><td colspan="2">{html.escape(group)}</td></tr>')
        rows.append(f"<tr><th>{html.escape(key)}</th><td>{html.escape(clip(flat[key], 2000))}</td></tr>")
    return f'<table class="st-meta">{"".join(rows)}</table>'


def last_step(series: dict[str, Series]) -> int | None:
    ends = [max(steps) for steps, _ in series.values() if steps]
    return max(ends) if ends else None


def duration(meta: dict[str, object]) -> str | None:
    seconds = meta.get("duration_s")
    start, end = meta.get("start_time"), meta.get("end_time", meta.get("last_time")) or _last_write(meta)
    if seconds is None and isinstance(start, (int, float)) and isinstance(end, (int, float)):
        seconds = end - start
    if not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
        return None
    if seconds < 60:  # as `show` says it: a run of 0.56 s is no "0 min 0 s"
        return f"{seconds:.3g} s" if seconds < 10 else f"{round(seconds)} s"
    hours, rest = divmod(int(seconds), 3600)
    return f"{hours} h {rest // 60} min" if hours else f"{rest // 60} min {rest % 60} s"


def _last_write(meta: dict[str, object]) -> float | None:
    """A stored run with no end time (live, or killed): the time of its newest point, where `show` ends its
    duration (the report said '–' beside show's 21s)."""
    if meta.get("format") != "stethoscope" or not isinstance(meta.get("path"), str):
        return None
    try:
        from stethoscope.store.query import open_run

        with open_run(meta["path"]) as reader:
            return reader.last_time()
    except Exception:  # noqa: BLE001 - a figure of the header, never a reason for no report
        return None


def logged_steps(series: dict[str, Series]) -> int:
    """The steps with a record in any series: what `diagnose` and `show` call the steps logged."""
    return len(set().union(*(steps for steps, _ in series.values()))) if series else 0


def facts(run: ReportInput) -> dict[str, str]:
    """The page's key figures, named and counted as `diagnose` prints them (the Monitor's own `steps` count
    takes in the steps a rollback abandoned: 310 for a 300-step run that redid 40 of them)."""
    last = last_step(run.series)
    facts = {"status": str(run.meta.get("status", "unknown")), "last step": "–" if last is None else f"{last:,}",
             "steps logged": f"{logged_steps(run.series):,}", "duration": duration(run.meta) or "–",
             "findings": findings_text(run.findings)}
    if run.ranks:
        facts["ranks"] = str(len(run.ranks))
    return facts


def findings_text(findings: Sequence[Finding]) -> str:
    """The findings by severity as `show` counts them ("2 info, 1 critical"; "none")."""
    counts = {sev: sum(f.severity == sev for f in findings) for sev in r.SEVERITIES}
    return ", ".join(f"{n} {sev}" for sev, n in counts.items() if n) or "none"
