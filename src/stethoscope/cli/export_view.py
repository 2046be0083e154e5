"""`stethoscope export …`: feed a run to the tools teams already run, or write their configuration.

`export` is a module-level click group; `export parquet` comes from parquet_view.py (added at the end of
this module). cli/main.py registers the group like every verb: through this module's `COMMANDS`.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from stethoscope.cli.parquet_view import parquet
from stethoscope.errors import UsageError

EXIT_STATUS = """\b
Exit status: 0 fine, 2 usage or input error (one line on stderr naming the file and the problem)."""


class _Group(click.Group):
    """Each subcommand's whole first line in the listing (click would cut it short)."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, cmd.get_short_help_str(limit=200)) for name, cmd in sorted(self.commands.items())
                if not cmd.hidden]
        with formatter.section("Commands"):
            formatter.write_dl(rows, col_max=18)


@click.group("export", cls=_Group, epilog=EXIT_STATUS)
def export() -> None:
    """Feed a run to Prometheus/Grafana, TensorBoard, W&B or MLflow, write their configuration, or write
    runs as Parquet for DuckDB, Spark or Trino.

    Live, from the training process: Monitor(..., prometheus_port=0, export=["tensorboard", "mlflow"]).
    Afterwards: a finished or imported run, or a foreign log (trainer_state.json, event files, ...).

    \b
    Examples:
      stethoscope export tensorboard runs/exp1
      stethoscope export prometheus-rules runs/exp1 -o stethoscope-rules.yml
      stethoscope export parquet runs/exp1 runs/exp2 fleet/
    """


def _rank_option(command: Any) -> Any:
    return click.option("--rank", "ranks", type=int, multiple=True,
                        help="Export only this rank (repeatable; default: every rank).")(command)


def _json_option(command: Any) -> Any:
    return click.option("--json", "as_json", is_flag=True, help="Print what was exported as JSON.")(command)


# -- Prometheus / Grafana ----------------------------------------------------------------------
@export.command("prometheus-rules", epilog=EXIT_STATUS)
@click.argument("run", required=False, type=click.Path())
@click.option("-o", "--out", type=click.Path(dir_okay=False, allow_dash=True), default="-", show_default=True,
              help="The rule file to write (- for stdout).")
@click.option("--format", "fmt", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True,
              help="YAML (what Prometheus' rule_files usually hold) or JSON.")
@click.option("--window", default="10m", show_default=True, help="The recent level a spike is measured against.")
@click.option("--long-window", default="1h", show_default=True, help="The baseline of slow changes.")
@click.option("--hang-after", type=float, default=600.0, show_default=True, metavar="SECONDS",
              help="Alert when a rank recorded no step for this long.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="A detector threshold (repeatable).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None, metavar="FILE.toml",
              help="Detector thresholds from the [detect] table of a TOML file (--set wins).")
def prometheus_rules(run: str | None, out: str, fmt: str, window: str, long_window: str, hang_after: float,
                     overrides: tuple[str, ...], config_file: str | None) -> None:
    """Prometheus alerting rules (for Alertmanager) with the built-in detectors' thresholds.

    RUN (optional) limits the rules to that run's `run` label (its directory's name).

    \b
    Examples:
      stethoscope export prometheus-rules -o stethoscope-rules.yml
      stethoscope export prometheus-rules runs/exp1 --set spike_sigma=8 --format json
    """
    from stethoscope.cli.diagnosis import detect_config
    from stethoscope.exporters.rules import alert_rules, to_yaml

    _check_duration(window, "--window")
    _check_duration(long_window, "--long-window")
    name = Path(run).resolve().name if run else None
    rules = alert_rules(detect_config(config_file, overrides), name, window, long_window, hang_after)
    _write(out, json.dumps(rules, indent=1) if fmt == "json" else to_yaml(rules) + "\n", "alerting rules")


@export.command("grafana", epilog=EXIT_STATUS)
@click.option("-o", "--out", type=click.Path(dir_okay=False, allow_dash=True), default="-", show_default=True,
              help="The dashboard JSON to write (- for stdout).")
@click.option("--title", default="stethoscope", show_default=True, help="The dashboard's title.")
def grafana(out: str, title: str) -> None:
    """A Grafana dashboard over the Prometheus metrics every rank serves (import it in Grafana).

    \b
    Examples:
      stethoscope export grafana -o stethoscope-dashboard.json --title "my runs"
    """
    from stethoscope.exporters.grafana import dashboard

    _write(out, json.dumps(dashboard(title), indent=1) + "\n", "Grafana dashboard")


# -- TensorBoard / W&B / MLflow ------------------------------------------------------------------
@export.command("tensorboard", epilog=EXIT_STATUS)
@click.argument("run", type=click.Path())
@click.argument("dest", required=False, type=click.Path(file_okay=False))
@_rank_option
@_json_option
def tensorboard(run: str, dest: str | None, ranks: tuple[int, ...], as_json: bool) -> None:
    """Write a run as TensorBoard event files in DEST.

    DEST defaults to RUN/tensorboard (./tensorboard/NAME for a foreign log); a run of several ranks gets
    one rank-N subdirectory per rank.

    \b
    Examples:
      stethoscope export tensorboard runs/exp1 && tensorboard --logdir runs/exp1/tensorboard
      stethoscope export tensorboard output/trainer_state.json tb/hf-run
    """
    from stethoscope.exporters.tensorboard import TensorBoard

    if dest is None and not _is_run(run):
        dest = str(Path("tensorboard") / _name(Path(run)))
    done = _export(run, lambda: TensorBoard(dest), ranks)
    _report(done, as_json, lambda e: str(e.logdir))


@export.command("wandb", epilog=EXIT_STATUS)
@click.argument("run", type=click.Path())
@click.argument("dest", required=False, type=click.Path(file_okay=False))
@click.option("--project", default="stethoscope", show_default=True, help="The W&B project.")
@click.option("--mode", type=click.Choice(["online", "offline"]), default=None,
              help="W&B's mode [default: W&B's own setting, e.g. $WANDB_MODE].")
@_rank_option
@_json_option
def wandb(run: str, dest: str | None, project: str, mode: str | None, ranks: tuple[int, ...], as_json: bool) -> None:
    """Log a run to Weights & Biases.

    W&B keeps its local run files under DEST (default: RUN, or . for a foreign log).

    \b
    Examples:
      stethoscope export wandb runs/exp1 --project llm-pretrain
      WANDB_MODE=offline stethoscope export wandb runs/exp1 && wandb sync runs/exp1/wandb/offline-run-*
    """
    from stethoscope.exporters.wandb import WandB

    if dest is None and not _is_run(run):
        dest = "."
    try:
        done = _export(run, lambda: WandB(project=project, dir=dest, mode=mode), ranks)
    except Exception as exc:
        raise _refusal("wandb", exc, "log in (`wandb login`), or write the run locally: --mode offline") from None
    _report(done, as_json, lambda e: str(e.local_dir or ""))


@export.command("mlflow", epilog=EXIT_STATUS)
@click.argument("run", type=click.Path())
@click.argument("dest", required=False)
@click.option("--experiment", default="stethoscope", show_default=True, help="The MLflow experiment.")
@_rank_option
@_json_option
def mlflow(run: str, dest: str | None, experiment: str, ranks: tuple[int, ...], as_json: bool) -> None:
    """Log a run to MLflow.

    DEST: a tracking URI (sqlite:///mlflow.db, http://host:5000, file:///…) or a
    directory (a file store); default: MLflow's own ($MLFLOW_TRACKING_URI).

    \b
    Examples:
      stethoscope export mlflow runs/exp1 http://mlflow.internal:5000 --experiment llm-pretrain
      MLFLOW_ALLOW_FILE_STORE=true stethoscope export mlflow runs/exp1 mlruns/
    """
    from stethoscope.exporters.mlflow import MLflow

    uri = dest if dest is None or "://" in dest or dest.startswith(("sqlite:", "databricks")) \
        else Path(dest).resolve().as_uri()
    try:
        done = _export(run, lambda: MLflow(tracking_uri=uri, experiment=experiment), ranks)
    except Exception as exc:
        if "MLFLOW_ALLOW_FILE_STORE" in str(exc):  # MLflow 3's refusal of a file store
            raise UsageError(f"{dest or uri}: MLflow refuses a directory (a file store) unless MLFLOW_ALLOW_FILE_STORE"
                             "=true is set; set it, or give a database: sqlite:///mlflow.db") from None
        raise _refusal("mlflow", exc, "check the tracking URI and the server") from None
    _report(done, as_json, lambda e: f"{uri or 'MLflow default'} run {e.run_id}")


# -- helpers -----------------------------------------------------------------------------------
def _refusal(tool: str, exc: Exception, then: str) -> Exception:
    """An exception the tool's own code raised (`wandb.errors.UsageError`: no API key; an MLflow server that says
    no) is the user's set-up, told in the tool's words with what to do (exit 2); any other is ours, as it was."""
    if type(exc).__module__.split(".")[0] != tool:
        return exc
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return UsageError(f"{tool} refused: {first}; {then}")


def _export(run: str, make: Callable[[], Any], ranks: tuple[int, ...]) -> list[Any]:
    from stethoscope.exporters.replay import export_run

    from stethoscope.diagnose.stored import run_incidents

    with _as_store(run) as (path, name):  # the findings every view shows (diagnose, show, report): the incidents
        return export_run(path, make, list(ranks) or None, name=name,
                          findings=lambda reader, rank: run_incidents(reader, rank).findings)


@contextlib.contextmanager
def _as_store(path: str) -> Iterator[tuple[Path, str]]:
    """A stethoscope run as it is; a foreign log (trainer_state.json, event files, …) read into a
    temporary store first."""
    from stethoscope.store.query import is_run

    p = Path(path)
    if not p.exists():
        raise UsageError(f"{p}: no such file or directory")
    if is_run(p):
        yield p, _name(p)
        return
    from stethoscope.diagnose.sources import import_into

    with tempfile.TemporaryDirectory(prefix="stethoscope-export-") as tmp:
        done = import_into(p, Path(tmp) / "run")
        if len(done) != 1:
            raise UsageError(f"{p}: holds {len(done)} logs; `stethoscope import` it, then export each run")
        yield done[0][0], _name(p)


def _is_run(path: str) -> bool:
    from stethoscope.store.query import is_run

    return is_run(path)


def _name(p: Path) -> str:
    p = p.resolve()
    if p.is_file():
        return p.parent.name if p.name in ("trainer_state.json", "metrics.csv") or p.suffix == ".sqlite" else p.stem
    return p.name


def _report(done: list[Any], as_json: bool, where: Callable[[Any], str]) -> None:
    rows = [{"rank": d.rank, "points": d.points, "findings": d.findings, "to": where(d.exporter)} for d in done]
    if as_json:
        click.echo(json.dumps(rows, indent=1))
        return
    for r in rows:
        click.echo(f"rank {r['rank']}: {r['points']:,} points, {r['findings']} finding{'s' * (r['findings'] != 1)} "
                   f"→ {r['to']}")


def _write(out: str, text: str, what: str) -> None:
    if out == "-":
        click.echo(text, nl=False)
        return
    target = Path(out)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, target)
    click.echo(f"{what} written to {target}", err=True)


def _check_duration(value: str, option: str) -> None:
    import re

    if not re.fullmatch(r"(\d+(ms|s|m|h|d|w|y))+", value):
        raise UsageError(f"{option}: expected a Prometheus duration like 10m, 1h or 1h30m, got {value!r}")


export.add_command(parquet)  # `export parquet` (cli/parquet_view.py)

COMMANDS = [export]
