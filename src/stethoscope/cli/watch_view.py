"""`stethoscope watch RUN`: a live terminal view (rich) — sparklines, rates, findings as they arrive."""

from __future__ import annotations

import math
import time
from typing import Any

import click
from rich.console import Group
from rich.table import Table
from rich.text import Text

from stethoscope.cli import render
from stethoscope.records import SEVERITIES

EXIT_STATUS = """\b
Exit status: 0 fine (also after Ctrl-C), 2 usage or input error (one line on stderr)."""

BARS = "▁▂▃▄▅▆▇█"
_SEVERITY_STYLE = {"critical": "bold red", "error": "red", "warning": "yellow", "info": "cyan"}


@click.command("watch", epilog=EXIT_STATUS)
@click.argument("run", type=click.Path())
@click.option("--rank", type=int, default=None, help="Which rank to show (default: the lowest).")
@click.option("--interval", type=click.FloatRange(min=0.1), default=2.0, show_default=True,
              help="Seconds between refreshes.")
@click.option("--once", is_flag=True, help="Print one frame and exit (for scripts and logs).")
@click.option("--findings", "n_findings", type=click.IntRange(min=0), default=8, show_default=True,
              help="How many of the newest findings to list.")
def watch(run: str, rank: int | None, interval: float, once: bool, n_findings: int) -> None:
    """A live view of a run in the terminal: curves, rates and findings as they arrive (works over SSH).

    Reads the run's store every --interval seconds (never writes to it); Ctrl-C leaves.

    \b
    Examples:
      stethoscope watch runs/demo
      stethoscope watch runs/exp1 --rank 3 --interval 5
      stethoscope watch runs/demo --once
    """
    from stethoscope.cli.listing import one_run
    from stethoscope.store.tail import read

    run = one_run(run, "watch")
    console = render.console()
    width = _spark_width(console.width)
    incidents = Incidents(run, rank, n_findings)
    if once:
        console.print(frame(incidents.fill(read(run, rank, width, n_findings)), seen=None))
        return
    from rich.live import Live

    seen: set[str] | None = None
    try:
        if not console.is_terminal:  # a pipe or a log file: rich's Live would print only at the end
            while True:
                snap = incidents.fill(read(run, rank, width, n_findings))
                console.print(frame(snap, seen))
                console.file.flush()
                seen = (seen or set()) | {f["id"] for f in snap.findings}
                time.sleep(interval)
        with Live(console=console, auto_refresh=False, screen=False, transient=False) as live:
            while True:
                snap = incidents.fill(read(run, rank, width, n_findings))
                live.update(frame(snap, seen), refresh=True)
                seen = (seen or set()) | {f["id"] for f in snap.findings}
                time.sleep(interval)
    except KeyboardInterrupt:
        return  # leaving is what Ctrl-C asks for: no error, no traceback


class Incidents:
    """The findings a frame lists: the run's incidents as every other view computes them
    (`diagnose.stored.run_incidents`), computed again when the run has moved on, at most once per ten times
    what the last computation took (a long run's diagnosis never makes the view lag)."""

    def __init__(self, run: str, rank: int | None, n: int) -> None:
        self.run, self.rank, self.n = run, rank, n
        self._basis: tuple[Any, ...] | None = None
        self._found: list[Any] = []
        self._next = 0.0

    def fill(self, snap: Any) -> Any:
        """`snap` with its findings (the `n` most severe) and counts replaced by the run's incidents."""
        from stethoscope.findings.incidents import finding_key

        basis = (snap.last_step, tuple(sorted(snap.counts.items())), snap.status)
        if basis != self._basis and time.monotonic() >= self._next:
            t0 = time.monotonic()
            self._found, self._basis = self._compute(), basis
            self._next = time.monotonic() + 9 * (time.monotonic() - t0)
        snap.findings = [{"id": finding_key(f), "step": f.step, "time": None, "type": f.type, "severity": f.severity,
                          "source": f.source, "message": f.message} for f in self._found[:self.n]]
        snap.counts = {}
        for f in self._found:
            snap.counts[f.severity] = snap.counts.get(f.severity, 0) + 1
        return snap

    def _compute(self) -> list[Any]:
        from stethoscope.diagnose.stored import run_incidents
        from stethoscope.store.query import open_run

        with open_run(self.run) as reader:
            return run_incidents(reader, self.rank).findings


def _spark_width(columns: int) -> int:
    return max(10, min(120, columns - 60))


def frame(snap: Any, seen: set[str] | None) -> Group:
    """One screen: header, curves, rates, findings (new ones since the previous frame marked)."""
    return Group(_header(snap), _ranks(snap), _curves(snap), _rates(snap), _findings(snap, seen))


def _ranks(snap: Any) -> Text:
    """Every rank's last step, and which rank is furthest behind (a straggler, or a rank that stopped)."""
    steps = {r: s for r, s in snap.rank_steps.items() if s is not None}
    if not steps:
        return Text()
    low, high = min(steps.values()), max(steps.values())
    text = Text(f"{len(snap.rank_steps)} ranks: last step {low}" + (f"..{high}" if high != low else ""), style="dim")
    if high != low:
        behind = min(steps, key=lambda r: (steps[r], r))
        gap = high - low
        text.append(f"  rank {behind} furthest behind ({gap} step{'s' if gap != 1 else ''})", style="yellow")
    unread = len(snap.rank_steps) - len(steps)
    if unread:
        text.append(f"  {unread} rank file(s) unreadable", style="red")
    return text


def _header(snap: Any) -> Text:
    text = Text()
    text.append(f"{snap.run}", style="bold")
    text.append(f"  rank {snap.rank}" + (f" of {snap.ranks}" if snap.ranks > 1 else ""))
    text.append(f"  step {snap.last_step if snap.last_step is not None else '-'}", style="bold")
    text.append(f"  {snap.status}", style="green" if snap.status == "running" else "")
    if snap.last_time is not None:
        text.append(f"  last write {render.fmt_duration(max(0.0, time.time() - snap.last_time))} ago")
    return text


def _curves(snap: Any) -> Table:
    table = Table(box=None, pad_edge=False, show_header=True, header_style="dim")
    for col, justify in (("series", "left"), ("curve", "left"), ("last", "right"), ("min", "right"),
                         ("max", "right"), ("at step", "right")):
        table.add_column(col, justify=justify, no_wrap=True)
    for c in snap.curves:
        table.add_row(Text(c.name), sparkline(c.buckets), Text(render.fmt(c.last)), Text(render.fmt(c.low)),
                      Text(render.fmt(c.high)), Text(render.fmt(c.last_step)))
    if not snap.curves:
        table.add_row(Text("no curves recorded yet", style="dim"), "", "", "", "", "")
    return table


def sparkline(buckets: list[float | None]) -> Text:
    """One character per bucket, scaled between the finite min and max; NaN as a red x, gaps as blanks."""
    finite = [v for v in buckets if v is not None and math.isfinite(v)]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 0.0)
    text = Text()
    for v in buckets:
        if v is None:
            text.append(" ")
        elif not math.isfinite(v):
            text.append("x", style="bold red")
        else:
            i = 0 if hi == lo else int((v - lo) / (hi - lo) * (len(BARS) - 1) + 0.5)
            text.append(BARS[i], style="cyan")
    return text


def _rates(snap: Any) -> Text:
    from stethoscope import records as R

    parts = [("steps/s", snap.steps_per_s)]
    labels = {R.STEP_TIME: "step time s", R.TOKENS_PER_S: "tokens/s", R.MFU: "MFU", R.DATA_WAIT: "data wait s",
              R.RSS: "RSS GiB", R.CUDA_PEAK: "GPU peak GiB", R.GPU_UTIL: "GPU util", R.GPU_TEMP: "GPU °C",
              R.GPU_POWER: "GPU W"}
    alarms = {R.GPU_THROTTLE_THERMAL: "GPU THERMAL THROTTLE", R.GPU_THROTTLE_POWER: "GPU at power cap",
              R.GPU_ECC_UNCORRECTED: "GPU UNCORRECTABLE ECC"}
    parts += [(labels[k], v) for k, v in snap.latest.items() if k in labels]
    text = Text()
    for label, value in parts:
        if value is not None:
            text.append(f"{label} ", style="dim")
            text.append(f"{render.fmt(value)}   ")
    for key, label in alarms.items():  # flags and counts: said only when they are set
        if snap.latest.get(key):
            text.append(label + "   ", style="bold red" if key != R.GPU_THROTTLE_POWER else "yellow")
    return text


def _findings(snap: Any, seen: set[str] | None) -> Table:
    counts = ", ".join(f"{snap.counts[sev]} {sev}" for sev in reversed(SEVERITIES) if snap.counts.get(sev))
    counts = counts or "none yet"
    table = Table(title=f"findings ({counts})", title_justify="left", box=None, pad_edge=False, header_style="dim")
    for col in ("", "step", "severity", "type", "message"):
        table.add_column(col, no_wrap=col != "message")
    for f in snap.findings:
        new = seen is not None and f["id"] not in seen
        table.add_row(Text("new" if new else "", style="bold magenta"), Text(render.fmt(f["step"])),
                      Text(str(f["severity"]), style=_SEVERITY_STYLE.get(f["severity"], "")),
                      Text(str(f["type"])), Text(str(f["message"])))
    return table


COMMANDS = [watch]
