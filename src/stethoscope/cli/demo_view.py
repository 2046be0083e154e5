"""`stethoscope demo`: the training with a live progress bar, then the run's summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from stethoscope.cli import render
from stethoscope.cli.findings_view import print_findings
from stethoscope.cli.listing import with_counts, live_findings, summary_table
from stethoscope.errors import UsageError


def run_demo(steps: int, out: str | None, inject: str | None, seed: int) -> Path:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise UsageError("the demo trains a small model and needs torch: pip install 'stethoscope[torch]'") from None
    from stethoscope.demo.run import DemoConfig, default_out, train
    from stethoscope.store.query import open_run
    from stethoscope.store.summary import summarize

    cfg = DemoConfig(steps=steps, inject=inject, seed=seed)
    run_dir = Path(out) if out else default_out()
    con = render.console()
    con.print(f"[bold]stethoscope demo[/]: tiny GPT ({cfg.n_layer} layers, d={cfg.n_embd}) on CPU, "
              f"{steps} steps → {run_dir}" + (f", injecting {inject}" if inject else ""))
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("loss {task.fields[loss]}"), TextColumn("{task.fields[tps]} tok/s"), TimeRemainingColumn())
    with Progress(*columns, console=con, transient=False) as progress:
        task = progress.add_task("training", total=steps, loss="-", tps="-")
        state: dict[str, Any] = {"last": None}
        tokens = cfg.batch_size * cfg.block_size

        def on_step(step: int, loss: Any) -> None:
            import time

            now = time.perf_counter()
            if step % 10 == 0 or step == steps - 1:
                tps = "-" if state["last"] is None else f"{tokens * 10 / (now - state['last']):,.0f}"
                progress.update(task, completed=step + 1, loss=f"{loss.item():.3f}", tps=tps)  # host sync: display
                state["last"] = now

        train(run_dir, cfg, on_step)
        progress.update(task, completed=steps)
    with open_run(run_dir) as reader:
        findings = live_findings(reader)
        con.print(summary_table(with_counts(summarize(reader), findings)))
    if findings:
        con.print("[bold]what stethoscope noticed while it trained:[/]")
        print_findings(con, findings[:10])
    con.print(f"run stored in [bold]{run_dir}[/]  — try: stethoscope query {run_dir} "
              "\"SELECT name, COUNT(*), MIN(value), MAX(value) FROM metrics GROUP BY name\"")
    return run_dir
