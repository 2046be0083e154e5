"""`stethoscope demo`: the training with a live progress bar, then the run's summary."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import click
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from stethoscope.cli import render
from stethoscope.cli.findings_view import print_findings
from stethoscope.cli.listing import last_loss_text, summary_table, with_counts
from stethoscope.cli.options import EXIT_STATUS_NO_FAIL_ON
from stethoscope.diagnose.stored import run_findings
from stethoscope.errors import UsageError
from stethoscope.store.db import holds_run, remove_run


def run_demo(steps: int, out: str | None, inject: str | None, seed: int, force: bool = False,
             alerts: str | None = None, recover: bool = False) -> Path:
    from stethoscope.demo.run import DemoConfig, default_out

    cfg = DemoConfig(steps=steps, inject=inject, seed=seed, recover=recover)  # a bad --steps/--inject is refused before anything
    alerts_config = _load_alerts(alerts)  # so is a bad alerts file (--alerts or $STETHOSCOPE_ALERTS)
    _need_torch()
    run_dir = Path(out) if out else default_out()
    if holds_run(run_dir):
        if not force:
            raise UsageError(f"{run_dir}: already holds a run; give another --out, or --force to replace it")
        remove_run(run_dir)
    if recover and alerts_config is False:  # the story needs the alerts: keep them in the run (and show them)
        from stethoscope.act import AlertsConfig, MemoryChannel

        alerts_config = AlertsConfig([MemoryChannel()])
    return _train_and_show(cfg, run_dir, alerts_config)


def _load_alerts(path: str | None) -> Any:
    from stethoscope.act.config import load_alerts
    from stethoscope.config import env_alerts_file

    path = path or env_alerts_file()
    if path is None:
        return False
    try:
        return load_alerts(path)
    except ValueError as exc:
        raise UsageError(f"alerts: {exc}") from None


def _need_torch() -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise UsageError(f"the demo trains a small model and needs torch: {torch_hint()}") from None


def torch_hint() -> str:
    """How to install torch for the way stethoscope itself was installed (from a clone: editable)."""
    import json
    from importlib import metadata

    try:
        direct = metadata.distribution("stethoscope").read_text("direct_url.json")
        url = json.loads(direct or "{}")
    except (metadata.PackageNotFoundError, ValueError):
        url = {}
    if url.get("dir_info", {}).get("editable"):
        where = url.get("url", "").removeprefix("file://")
        return f"cd {where} && pip install -e '.[torch]'" if where else "pip install -e '.[torch]'"
    if url.get("url", "").startswith("file://"):
        return f"pip install '{url['url'].removeprefix('file://')}[torch]'"
    return "pip install 'stethoscope[torch]'"


def _train_and_show(cfg: Any, run_dir: Path, alerts: Any = False) -> Path:
    from stethoscope.demo.run import run
    from stethoscope.store.query import open_run
    from stethoscope.store.summary import summarize

    steps, inject = cfg.steps, cfg.inject
    con = render.console()
    con.print(Text(f"stethoscope demo: tiny GPT ({cfg.n_layer} layers, d={cfg.n_embd}) on CPU, "
                   f"{steps} step{'s' * (steps != 1)} → {run_dir}" + (f", injecting {inject}" if inject else "")))
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("loss {task.fields[loss]}"), TextColumn("{task.fields[tps]}"), TimeRemainingColumn())
    with Progress(*columns, console=con, transient=False) as progress:
        task = progress.add_task("training", total=steps, loss="-", tps="")  # a rate once two updates are timed
        state: dict[str, Any] = {"last": None, "at": 0}
        tokens = cfg.batch_size * cfg.block_size

        def on_step(step: int, loss: Any) -> None:
            import time

            now = time.perf_counter()
            if step % 10 == 0 or step == steps - 1:
                done = step - state["at"]  # the last update need not be 10 steps after the one before
                tps = "" if state["last"] is None else f"{tokens * done / max(now - state['last'], 1e-9):,.0f} tok/s"
                progress.update(task, completed=step + 1, loss=f"{loss.item():.3f}", tps=tps)  # host sync: display
                state["last"], state["at"] = now, step

        result = run(run_dir, cfg, on_step, alerts)
        progress.update(task, completed=steps)
    with open_run(run_dir) as reader:
        findings = run_findings(reader)
        con.print(summary_table(with_counts(last_loss_text(summarize(reader), reader), findings)))  # as show
    if findings:
        con.print("[bold]what stethoscope noticed:[/]")
        print_findings(con, findings, min_severity="warning", limit=10)
    if cfg.recover:
        from stethoscope.cli.recovery_view import print_recovery

        print_recovery(con, run_dir, cfg, result, columns)
    elif alerts:
        from stethoscope.cli.alerts_view import alert_rows

        rows = alert_rows(str(run_dir))
        sent = sum(r["status"] == "sent" for r in rows)
        click.echo(f"alerts: {sent} delivered, {len(rows) - sent} failed — see: stethoscope alerts "
                   f"{shlex.quote(str(run_dir))}")
    print_next(run_dir)
    return run_dir


def print_next(run_dir: Path) -> None:
    """The commands a user wants next, one per line, never wrapped mid-command (plain echo, no rich)."""
    q = shlex.quote(str(run_dir))
    click.echo(f"\nrun stored in {run_dir}. Next:")
    for cmd in (f"stethoscope diagnose {q}", f"stethoscope report {q} -o report.html", f"stethoscope show {q}",
                f"stethoscope query {q} --schema",
                f"stethoscope query {q} \"SELECT name, COUNT(*), MIN(value), MAX(value) FROM metrics GROUP BY name\""):
        click.echo(f"  {cmd}")


@click.command(epilog=EXIT_STATUS_NO_FAIL_ON)
@click.option("--steps", type=int, default=None, help="Training steps (1-7 minutes per 1000, by the machine and its load) [1000; 400 with --recover].")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Run directory [runs/demo; runs/demo-2, -3, … when that holds a run].")
@click.option("--inject", default=None, metavar="KIND@STEP",
              help="Inject a fault at a step inside the run: nan@N (a weight turns NaN: NaN from N on), "
                   "spike@N (a garbage batch; with --recover 20 of them, a bad shard), lr@N (LR x50 from N on) or "
                   "diverge@N (LR x100 for 10 steps).")
@click.option("--recover", is_flag=True, help="Checkpoint as it goes and turn automatic recovery on (rollback past "
              "the fault); then train the same run without the fault and compare the final losses.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the model and the data order.")
@click.option("--force", is_flag=True, help="Replace the run already in --out (without it, --out must hold no run).")
@click.option("--alerts", type=click.Path(dir_okay=False), default=None, metavar="FILE.toml",
              help="Send alerts as the run goes (channels in a TOML file; default: $STETHOSCOPE_ALERTS).")
def demo(steps: int | None, out: str | None, inject: str | None, recover: bool, seed: int, force: bool,
         alerts: str | None) -> None:
    """Train a tiny GPT on CPU with stethoscope watching, then show what it noticed.

    \b
    Examples:
      stethoscope demo
      stethoscope demo --steps 600 --inject spike@300 --out runs/spike --force
      stethoscope demo --inject diverge@150 --recover --alerts alerts.toml
    """
    steps = steps if steps is not None else (400 if recover else 1000)
    run_demo(steps=steps, out=out, inject=inject, seed=seed, force=force, alerts=alerts, recover=recover)


COMMANDS = [demo]
