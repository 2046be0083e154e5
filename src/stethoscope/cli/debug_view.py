"""`stethoscope debug RUN`: for each NaN, loss spike or divergence a run recorded, the workflow's checks that the
store answers (run here), what each would add with the live model, and the Python call that runs them on it."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.markup import escape

from stethoscope.cli import render
from stethoscope.errors import UsageError
from stethoscope.findings.catalogue import NAN
from stethoscope.records import Finding


@click.command("debug")
@click.argument("run", type=click.Path())
@click.option("--step", type=int, default=None, help="Only the finding at this step (or the last one before it).")
@click.option("--all", "show_all", is_flag=True, help="Include info findings (small spikes that recovered).")
@click.option("--json", "as_json", is_flag=True, help="Print the checks and their results as JSON.")
def debug(run: str, step: int | None, show_all: bool, as_json: bool) -> None:
    """Run the checks a run's store allows for each NaN, loss spike and divergence, and say which need the model.

    From the store: the batch's sample ids, the report the Monitor stored when it re-ran a non-finite
    step's batch (`Monitor(debug_nonfinite=True)`), the loss and grad norm around the finding (which went
    non-finite first, a lead-up or one step, whether it stayed) and the LR schedule. The per-example,
    per-layer and numerics checks need your model and that step's batch: the
    `stethoscope.debug.workflow(...)` call printed for each finding runs all four on them.

    \b
    Examples:
      stethoscope debug runs/exp1
      stethoscope debug runs/exp1 --step 3010 --json
    """
    from stethoscope.diagnose.stored import run_findings
    from stethoscope.debug.workflows import PLAN
    from stethoscope.store.query import open_run

    with open_run(run) as reader:
        events = _debug_events(reader)
        targets = _targets(run_findings(reader), events, step)
        if step is not None and not targets:
            raise UsageError(f"{run}: no NaN, loss spike or divergence finding at or before step {step}")
        shown = [t for t in targets if show_all or step is not None or t["severity"] != "info"]
        plans = [_plan(t, run, events, reader) for t in shown]
    if as_json:
        click.echo(render.to_json({"run": run, "checks": [{"title": t, "checks": c, "needs": n} for t, c, n in PLAN],
                                   "findings": plans, "left_out": len(targets) - len(shown)}))
        return
    _print(render.console(), run, plans, len(targets) - len(shown))


def _targets(findings: list[Finding], events: dict[int, dict[str, Any]], step: int | None) -> list[dict[str, Any]]:
    """The findings a workflow exists for, the symptoms of that kind an incident folded in, and the steps
    the Monitor's locator re-ran."""
    from stethoscope.debug.workflows import KINDS

    out: dict[tuple[str, int | None], dict[str, Any]] = {}
    for f in findings:
        if f.type in KINDS:
            out.setdefault((f.type, f.step), {"type": f.type, "step": f.step, "severity": f.severity,
                                              "message": f.message, "batch_ids": f.evidence.get("batch_ids")})
        for s in f.symptoms:
            if s.get("type") in KINDS:
                out.setdefault((s["type"], s.get("step")), {"type": s["type"], "step": s.get("step"),
                                                            "severity": f.severity,
                                                            "message": f"a symptom of the {f.type} at step {f.step}",
                                                            "batch_ids": None})
    for s_, ev in events.items():
        if not any(key[1] == s_ and KINDS[key[0]] == NAN for key in out):
            out[(NAN, s_)] = {"type": NAN, "step": s_, "severity": "critical", "message": ev["message"],
                                "batch_ids": None}
    found = sorted(out.values(), key=lambda t: (t["step"] is None, t["step"] or 0))
    if step is None:
        return found
    before = [t for t in found if t["step"] is not None and t["step"] <= step]
    return [t for t in before if t["step"] == before[-1]["step"]] if before else []


def _debug_events(reader: Any) -> dict[int, dict[str, Any]]:
    _, rows = reader.query("SELECT step, message, data FROM events WHERE kind = 'debug' ORDER BY id")
    out = {}
    for step, message, data in rows:
        try:
            out[step] = {"message": message, **json.loads(data or "{}")}
        except ValueError:
            out[step] = {"message": message}
    return out


def _plan(target: dict[str, Any], run: str, events: dict[int, dict[str, Any]], reader: Any) -> dict[str, Any]:
    from stethoscope.debug.stored import stored_workflow
    from stethoscope.debug.workflows import KINDS

    step = target["step"]
    call = (f"workflow({ {'type': target['type'], 'step': step}!r}, dict(model=model, optimizer=optimizer, "
            f"batch=batch_of_step_{step}, loss_fn=loss_fn, run={run!r}))")
    report = events.get(step) if KINDS[target["type"]] == NAN else None
    done = stored_workflow({"type": target["type"], "step": step, "message": target["message"]}, reader, report)
    return {**target, "workflow": KINDS[target["type"]], "stored_report": events.get(step),
            "checks": done.to_dict()["steps"], "conclusion": done.conclusion, "python": call}


def _print(con: Any, run: str, plans: list[dict[str, Any]], left_out: int) -> None:
    more = f" ({left_out} info finding(s) left out: --all)" if left_out else ""
    if not plans:
        con.print(f"no NaN, loss spike or divergence finding in {run}: nothing to debug{more}")
        return
    con.print(f"[bold]{len(plans)} finding(s) to debug[/] in {run}{more}: the checks its store allows, run; "
              "what each adds with your model and the batch, and the call that runs it")
    for p in plans:
        con.print(f"\n[bold]{p['type']}[/] at step {p['step']} ({p['severity']}): {escape(p['message'])}", soft_wrap=True)
        ids, rep = p.get("batch_ids"), p.get("stored_report")
        if ids and "(samples " not in p["checks"][0]["found"]:
            con.print(f"  batch samples: {', '.join(map(str, ids[:8]))}" + (" …" if len(ids) > 8 else ""))
        if rep and "re-run by the Monitor" not in p["checks"][0]["found"]:
            con.print(f"  re-run by the Monitor: {escape(rep.get('verdict') or rep['message'])}", soft_wrap=True)
        for i, c in enumerate(p["checks"], 1):
            con.print(f"  {i}. {c['title']} \\[{c['status']}]: {escape(c['found'])}", soft_wrap=True, highlight=False)
            con.print(f"     next: {escape(c['next'])}", soft_wrap=True, highlight=False)
            con.print(f"     [dim]with the live model: {escape(c['data']['needs_live_model'])}[/]", soft_wrap=True)
        con.print(f"  => {escape(p['conclusion'])}", soft_wrap=True, highlight=False)
        con.print(f"  {escape(p['python'])}", highlight=False, soft_wrap=True)
    con.print("\nRun the four checks on your model, with that step's batch re-fetched from your data pipeline:\n"
              "  from stethoscope.debug import workflow\n  print(workflow(...))   # as above", highlight=False)


COMMANDS = [debug]
