"""`stethoscope demo --recover`: the incident as it unfolded (alerts, rollbacks, outcome), then the same run
without the fault, and the two final losses side by side."""

from __future__ import annotations

import json
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from rich.progress import Progress

from stethoscope.store.query import open_run


def story(run_dir: Path) -> list[tuple[int | None, str]]:
    """(step, line) for each alert sent (once, whatever the channels) and each recovery event, in order."""
    from stethoscope.act.alert import Alert

    with open_run(run_dir) as reader:
        _, rows = reader.query("SELECT step, kind, message, data FROM events WHERE rank = ? AND kind IN "
                               "('alert', 'recovery') ORDER BY id", (reader.ranks[0],))
    out: list[tuple[int | None, str]] = []
    seen: set[tuple[str, str, str]] = set()
    for step, kind, message, data in rows:
        d = json.loads(data) if data else {}
        if kind == "recovery":
            out.append((step, f"  {_tag(d.get('action'))} {message}"))
            continue
        if d.get("status") != "sent" or not d.get("alert"):
            continue
        alert = Alert.from_dict(d["alert"])
        if (alert.key, alert.kind, alert.note) in seen:
            continue
        seen.add((alert.key, alert.kind, alert.note))
        title = alert.title().split(" (")[0]
        if alert.type == "rollback":  # its words are the recovery event's, just above
            out.append((step, f"  alert    {title}: {alert.note}"))
            continue
        note = f" — {alert.note}" if alert.note else ""
        out.append((step, f"  alert    {title}: {_short(alert.message)}{note}"))
    return out


def print_recovery(con: Any, run_dir: Path, cfg: Any, result: dict[str, Any], columns: Any) -> None:
    from stethoscope.demo.run import run

    con.print("[bold]the incident, the alerts and the recovery, in order:[/]")
    lines = story(run_dir)
    for _, line in lines:
        click.echo(line)
    if not lines:
        click.echo("  nothing to recover from: no incident reached a rollback")
    if not cfg.inject:  # the run without the fault would be this very run again: minutes for a +0.0%
        click.echo(f"\nfinal held-out loss: {result['final_loss']:.4f} (no fault injected, so no run without it to "
                   "compare: add --inject diverge@150 to watch a recovery)")
        return
    twin = replace(cfg, inject=None, recover=False)
    with Progress(*columns, console=con, transient=False) as progress:
        task = progress.add_task("same run, no fault", total=twin.steps, loss="-", tps="")

        def on_step(step: int, loss: Any) -> None:
            if step % 10 == 0 or step == twin.steps - 1:
                progress.update(task, completed=step + 1, loss=f"{loss.item():.3f}")  # host sync: display

        with tempfile.TemporaryDirectory(prefix="stethoscope-demo-twin-") as tmp:
            clean = run(Path(tmp), twin, on_step, alerts=False, detect=False)
        progress.update(task, completed=twin.steps)
    mine, ref = result["final_loss"], clean["final_loss"]
    n = len(result["rollbacks"])
    how = f"with {cfg.inject}" if cfg.inject else "this run"
    what = f"{n} rollback{'s' if n != 1 else ''}"
    skipped = sum(r["skip"][1] - r["skip"][0] + 1 for r in result["rollbacks"] if r.get("skip"))
    if n:
        what += f": {skipped} batches skipped, LR x{result['rollbacks'][-1]['lr_scale']:.3g} from the rollback on"
    if result["gave_up"]:
        what += f", then recovery gave up and stopped the run at step {result['stopped']}"
    rel = (mine - ref) / ref * 100 if ref else float("nan")
    click.echo(f"\nfinal held-out loss: {mine:.4f} {how} and automatic recovery ({what})")
    click.echo(f"                     {ref:.4f} the same run without the fault (seed {cfg.seed}, {cfg.steps} steps)"
               f"  -> {rel:+.1f}%")


def _tag(action: str | None) -> str:
    return {"rollback": "ROLLBACK", "recovered": "RECOVERED", "gave_up": "GAVE UP "}.get(action or "", "recovery")


def _short(text: str, limit: int = 110) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."
