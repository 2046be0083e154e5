"""`stethoscope runs` and `stethoscope show`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from stethoscope.cli import render
from stethoscope.cli.findings_view import print_findings, shown
from stethoscope.diagnose.stored import run_findings
from stethoscope.config import env_runs_dir
from stethoscope.errors import StethoscopeError, UsageError
from stethoscope.records import LOSS, SEVERITIES, Finding
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


def one_run(path: str, verb: str) -> str:
    """`path`, unless it is a folder holding runs rather than being one (an imported log of several runs, a
    folder of runs): then a UsageError naming them, as `stethoscope runs` lists them; or a foreign log: then
    one saying how to import it."""
    p = Path(path)
    if p.is_file() and not is_run(p):
        raise UsageError(f"{path}: a log, not a stethoscope run: `stethoscope import {path} --into DIR` stores it to "
                         f"{verb}; `stethoscope diagnose {path}` and `report` read it as it is")
    if not p.is_dir() or is_run(p):
        return path
    found = find_runs(p)
    if not found:
        return path  # opening it says what is wrong
    names = ", ".join(str(f) for f in found[:4]) + (", …" if len(found) > 4 else "")
    raise UsageError(f"{path}: a folder of {len(found)} run{'s' * (len(found) > 1)}, not one run ({names}); "
                     f"give one: `stethoscope {verb} {found[0]}` (`stethoscope diagnose {path}` diagnoses them all)")


def list_runs(directory: str | None, as_json: bool) -> None:
    root = Path(directory or env_runs_dir())
    if not root.is_dir():
        raise UsageError(f"{root}: no such directory (give the folder that holds your runs)")
    found = find_runs(root)
    if not found:
        raise UsageError(f"{root}: no runs here (a run is a folder with rank-*.sqlite files, looked 3 levels down; "
                         "make one with `stethoscope demo` or `stethoscope import LOG --into DIR`)")
    summaries = [_listed(run, as_json) for run in found]
    if as_json:
        click.echo(render.to_json(summaries))
        return
    cols = ("run", "status", "ranks", "last step", "steps logged", "last loss", "tokens/s", "findings", "started",
            "duration")
    rows = [(s["run"], s.get("status"), s.get("ranks"), s.get("last_step"), s.get("logged_steps"), s.get("last_loss"),
             s.get("tokens_per_s"), _findings_text(s.get("findings")), render.fmt_time(s.get("start_time")),
             render.fmt_duration(s.get("duration_s"))) for s in summaries]
    render.console().print(render.rows_table(cols, rows, title=f"runs under {root}"))


def _listed(run: Path, as_json: bool) -> dict[str, Any]:
    """One run's summary; a run that cannot be read is listed and marked, never aborts the listing."""
    try:
        with open_run(run) as reader:
            reader.verify()
            summary = with_counts(summarize(reader), run_findings(reader))
            summary = _with_skipped(summary, reader)
            return summary if as_json else last_loss_text(summary, reader)
    except StethoscopeError as exc:
        return {"run": str(run), "status": f"unreadable: {exc}"}
    except Exception as exc:  # noqa: BLE001 - one run's surprise never hides the others
        return {"run": str(run), "status": f"unreadable: {type(exc).__name__}: {exc} (a bug: please report it)"}


def show_run(run: str, as_json: bool, min_severity: str | None = None) -> None:
    with open_run(one_run(run, "show")) as reader:
        reader.verify()
        findings = run_findings(reader)
        summary = _with_skipped(with_counts(summarize(reader), findings), reader)
        shown_summary = last_loss_text(summary, reader)
    for skipped in summary.get("skipped_ranks", []):
        click.echo(f"stethoscope: warning: skipped {skipped}", err=True)
    if as_json:
        floor = shown(findings, min_severity) if min_severity else findings
        click.echo(render.to_json({**summary, "findings_list": [f.to_dict() for f in floor]}))
        return
    con = render.console()
    con.print(summary_table(shown_summary))
    if findings:
        con.print("[bold]findings[/] (most severe first; the same as `stethoscope diagnose` of this run)")
        print_findings(con, findings, min_severity=min_severity or "warning", limit=20)


def last_loss_text(summary: dict[str, Any], reader: RunReader) -> dict[str, Any]:
    """The table's last loss: `nan` where the newest loss is NaN (the summary's None, SQL's NULL, also means no
    loss at all), as `watch` and `compare` print it; the JSON keeps null."""
    if summary.get("last_loss") is None and reader.ranks:
        values = reader.series_arrays(LOSS, reader.ranks[0])[1]
        if len(values) and values[-1] != values[-1]:
            return {**summary, "last_loss": "nan"}
    return summary


def _with_skipped(summary: dict[str, Any], reader: RunReader) -> dict[str, Any]:
    if reader.skipped:
        summary["skipped_ranks"] = list(reader.skipped)
        summary["status"] = f"{summary.get('status') or '-'} ({len(reader.skipped)} rank file(s) unreadable)"
    return summary


def with_counts(summary: dict[str, Any], findings: list[Finding]) -> dict[str, Any]:
    summary["findings"] = {sev: sum(f.severity == sev for f in findings) for sev in SEVERITIES}
    return summary


def summary_table(s: dict[str, Any]) -> Any:
    items = [
        ("run", s["run"]), ("status", s.get("status") or "-"), ("ranks", s["ranks"]),
        ("last step", s["last_step"]), ("steps logged", s["logged_steps"]),
        ("last loss", s["last_loss"]), ("min loss", s["min_loss"]),
        ("min eval loss", s["min_eval_loss"]), ("tokens/s (median)", s["tokens_per_s"]),
        ("step time s (median)", s["step_time_s"]), ("MFU (median)", s["mfu"]),
        ("peak host RSS GiB", s["peak_rss_gib"]), ("peak CUDA GiB", s["peak_cuda_gib"]),
        ("findings", _findings_text(s["findings"])), ("started", render.fmt_time(s["start_time"])),
        ("duration", render.fmt_duration(s["duration_s"])),
    ]
    return render.kv_table(items, title="stethoscope show")


def _findings_text(counts: dict[str, int] | None) -> str:
    if counts is None:
        return "-"  # an unreadable run: nothing is known of its findings, not 'none'
    if not any(counts.values()):
        return "none"
    return ", ".join(f"{n} {sev}" for sev, n in counts.items() if n)
