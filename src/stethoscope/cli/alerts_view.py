"""`stethoscope alerts RUN`: what the run's alerts said, to whom, and which deliveries failed."""

from __future__ import annotations

import json
from typing import Any

import click

from stethoscope.cli import render
from stethoscope.cli.options import EXIT_STATUS_NO_FAIL_ON
from stethoscope.store.query import open_run


def alert_rows(run: str) -> list[dict[str, Any]]:
    """Every delivery the run recorded (all ranks), oldest first."""
    with open_run(run) as reader:
        _, rows = reader.query("SELECT rank, step, time, severity, message, data FROM alerts ORDER BY time, rank, id")
    out = []
    for rank, step, t, severity, message, data in rows:
        try:
            d = json.loads(data) if data else {}
        except ValueError:
            d = {}
        alert = d.get("alert") or {}
        out.append({"time": t, "rank": rank, "step": step, "severity": severity, "kind": alert.get("kind"),
                    "type": alert.get("type"), "channel": d.get("channel"), "to": d.get("target"),
                    "status": d.get("status"), "attempts": d.get("attempts"), "error": d.get("error"),
                    "title": alert.get("title") or message, "key": alert.get("key"), "basis": alert.get("basis")})
    return out


def list_alerts(run: str, as_json: bool, failed_only: bool) -> int:
    rows = alert_rows(run)
    shown = [r for r in rows if r["status"] == "failed"] if failed_only else rows
    if as_json:
        click.echo(render.to_json(shown))
        return 0
    con = render.console()
    if not rows:
        con.print(f"{run}: no alerts were sent (none configured, or nothing reached a channel's min_severity)")
        return 0
    cols = ("time", "rank", "step", "kind", "severity", "type", "channel", "to", "status", "tries", "error")
    table = [(r["time"], r["rank"], r["step"], r["kind"], r["severity"], r["type"], r["channel"], r["to"],
              r["status"], r["attempts"], r["error"] or "") for r in shown]
    con.print(render.rows_table(cols, table, title=f"alerts of {run}"))
    sent = sum(r["status"] == "sent" for r in rows)
    held = sum(r["status"] == "held" for r in rows)
    failed = len(rows) - sent - held
    con.print(f"{sent} delivered, {failed} failed" + (f", {held} held back (the error column says why: the run's incidents "
              "grade them below the channel's min_severity, or hold no such problem)" if held else "") +
              (" — failed deliveries name the error; the run itself was not slowed" if failed else ""))
    return 0


@click.command(epilog=EXIT_STATUS_NO_FAIL_ON)
@click.argument("run", type=click.Path())
@click.option("--failed", "failed_only", is_flag=True, help="Only the deliveries that failed.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def alerts(run: str, failed_only: bool, as_json: bool) -> None:
    """What the run's alerts said, to which channel, and which deliveries failed (and why).

    \b
    Examples:
      stethoscope alerts runs/demo
      stethoscope alerts runs/demo --failed --json
    """
    list_alerts(run, as_json, failed_only)


COMMANDS = [alerts]
