"""`stethoscope runs` and `stethoscope show`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from stethoscope.cli import render
from stethoscope.config import env_runs_dir
from stethoscope.errors import NotARunError, UsageError
from stethoscope.cli.findings_view import print_findings
from stethoscope.records import SEVERITIES, Finding
from stethoscope.store.query import RunReader, is_run, open_run
from stethoscope.store.summary import summarize


def find_runs(root: Path, max_depth: int = 3) -> list[Path]:
    """Run directories under `root` (itself included), at most `max_depth` levels down."""
    if is_run(root):
        return [root]
    found: list[Path] = []
    frontier = [root]
    for _ in range(max_depth):
        nxt = []
        for d in frontier:
            for child in sorted(p for p in d.iterdir() if p.is_dir()):
                (found if is_run(child) else nxt).append(child)
        frontier = nxt
    return found


def list_runs(directory: str | None, as_json: bool) -> None:
    root = Path(directory or env_runs_dir())
    if not root.is_dir():
        raise UsageError(f"{root}: no such directory (give the folder that holds your runs)")
    summaries = []
    for run in find_runs(root):
        try:
            with open_run(run) as reader:
                summaries.append(with_counts(summarize(reader), live_findings(reader)))
        except NotARunError as exc:
            summaries.append({"run": str(run), "status": f"unreadable: {exc}"})
    if as_json:
        click.echo(render.to_json(summaries))
        return
    cols = ("run", "status", "ranks", "steps", "last loss", "tokens/s", "findings", "started", "duration")
    rows = [(s["run"], s.get("status"), s.get("ranks"), s.get("steps"), s.get("last_loss"), s.get("tokens_per_s"),
             _findings_text(s.get("findings")), render.fmt_time(s.get("start_time")),
             render.fmt_duration(s.get("duration_s"))) for s in summaries]
    render.console().print(render.rows_table(cols, rows, title=f"runs under {root}"))


def show_run(run: str, as_json: bool) -> None:
    with open_run(run) as reader:
        findings = live_findings(reader)
        summary = with_counts(summarize(reader), findings)
    if as_json:
        click.echo(render.to_json({**summary, "findings_list": [f.to_dict() for f in findings]}))
        return
    con = render.console()
    con.print(summary_table(summary))
    if findings:
        con.print("[bold]findings recorded live[/] (most severe first)")
        print_findings(con, findings[:20])


def live_findings(reader: RunReader) -> list[Finding]:
    """The findings the live detectors recorded, follow-ups merged, most severe first."""
    from stethoscope.diagnose.batches import attach_batch_ids, store_lookup
    from stethoscope.diagnose.knowledge import advise
    from stethoscope.findings.pipeline import finalise, ranked

    _, rows = reader.query("SELECT data FROM findings WHERE data IS NOT NULL ORDER BY id")
    found = []
    for (data,) in rows:
        try:
            found.append(Finding.from_dict(json.loads(data)))
        except (ValueError, TypeError, KeyError):
            continue  # an event that is not a finding (written by a later version, say)
    findings = finalise(found)  # the same pipeline as `diagnose`
    attach_batch_ids(findings, store_lookup(reader.query, reader.ranks[0]))  # before advice: it names a bad batch
    return ranked([advise(f) for f in findings])


def with_counts(summary: dict[str, Any], findings: list[Finding]) -> dict[str, Any]:
    summary["findings"] = {sev: sum(f.severity == sev for f in findings) for sev in SEVERITIES}
    return summary


def summary_table(s: dict[str, Any]) -> Any:
    items = [
        ("run", s["run"]), ("status", s.get("status") or "-"), ("ranks", s["ranks"]), ("steps", s["steps"]),
        ("last step", s["last_step"]), ("last loss", s["last_loss"]), ("min loss", s["min_loss"]),
        ("min eval loss", s["min_eval_loss"]), ("tokens/s (median)", s["tokens_per_s"]),
        ("step time s (median)", s["step_time_s"]), ("MFU (median)", s["mfu"]),
        ("peak host RSS GiB", s["peak_rss_gib"]), ("peak CUDA GiB", s["peak_cuda_gib"]),
        ("findings", _findings_text(s["findings"])), ("started", render.fmt_time(s["start_time"])),
        ("duration", render.fmt_duration(s["duration_s"])),
    ]
    return render.kv_table(items, title="stethoscope show")


def _findings_text(counts: dict[str, int] | None) -> str:
    if not counts or not any(counts.values()):
        return "none"
    return ", ".join(f"{n} {sev}" for sev, n in counts.items() if n)
