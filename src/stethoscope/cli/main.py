"""The `stethoscope` command. Exit status: 0 fine, 1 findings at or above --fail-on, 2 bad input."""

from __future__ import annotations

import sys
from typing import Any

import click

from stethoscope import __version__
from stethoscope.cli import render
from stethoscope.errors import StethoscopeError, UsageError


class Group(click.Group):
    """Every StethoscopeError becomes one line on stderr and its exit status; never a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except StethoscopeError as exc:
            click.echo(f"stethoscope: error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except click.ClickException:
            raise
        except OSError as exc:
            click.echo(f"stethoscope: error: {exc}", err=True)
            ctx.exit(2)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="stethoscope")
def cli() -> None:
    """Keeps watch over deep-learning training runs and tells you what is wrong, why, and what to do."""


# -- demo --------------------------------------------------------------------------------------
@cli.command()
@click.option("--steps", type=int, default=1000, show_default=True, help="Training steps.")
@click.option("--out", type=click.Path(file_okay=False), default=None, help="Run directory [runs/demo-<time>].")
@click.option("--inject", default=None, metavar="KIND@STEP", help="Inject a fault: nan@N, spike@N or lr@N.")
@click.option("--seed", type=int, default=0, show_default=True)
def demo(steps: int, out: str | None, inject: str | None, seed: int) -> None:
    """Train a tiny GPT on CPU with the Monitor on, then show what was recorded."""
    from stethoscope.cli.demo_view import run_demo

    run_demo(steps=steps, out=out, inject=inject, seed=seed)


# -- runs / show / query -----------------------------------------------------------------------
@cli.command()
@click.argument("directory", required=False, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def runs(directory: str | None, as_json: bool) -> None:
    """List the runs under DIRECTORY (default: $STETHOSCOPE_RUNS or ./runs)."""
    from stethoscope.cli.listing import list_runs

    list_runs(directory, as_json)


@cli.command()
@click.argument("run", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show(run: str, as_json: bool) -> None:
    """Summary of one run: steps, losses, throughput, memory, findings, duration."""
    from stethoscope.cli.listing import show_run

    show_run(run, as_json)


@cli.command()
@click.argument("run", type=click.Path())
@click.argument("sql")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array of row objects.")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV with a header.")
def query(run: str, sql: str, as_json: bool, as_csv: bool) -> None:
    """Read-only SQL over a run (views: metrics, findings, alerts, events, … each with a rank column)."""
    from stethoscope.store.query import open_run

    if as_json and as_csv:
        raise UsageError("--json and --csv exclude each other")
    with open_run(run) as reader:
        cols, rows = reader.query(sql)
    if as_json:
        click.echo(render.rows_json(cols, rows))
    elif as_csv:
        click.echo(render.rows_csv(cols, rows), nl=False)
    else:
        render.console().print(render.rows_table(cols, rows))


# -- diagnosis ---------------------------------------------------------------------------------
_FAIL_ON = click.Choice(["never", "info", "warning", "error", "critical"])


def _detect_options(command: Any) -> Any:
    """--set key=value (repeatable) and --config FILE.toml: the detectors' thresholds (DetectConfig)."""
    command = click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                           help="A detector threshold, e.g. --set spike_sigma=8 (repeatable; keys: README, "
                                "'Tuning the detectors').")(command)
    return click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
                        metavar="FILE.toml", help="Detector thresholds from the [detect] table of a TOML file "
                                                  "(--set wins).")(command)


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="One JSON object per input (a list for several).")
@click.option("--fail-on", type=_FAIL_ON, default="never", show_default=True,
              help="Exit 1 when a finding is at or above this severity.")
@click.option("--rank", type=int, default=None, help="Which rank of a multi-rank run (default: the lowest).")
@_detect_options
@click.pass_context
def diagnose(ctx: click.Context, paths: tuple[str, ...], as_json: bool, fail_on: str, rank: int | None,
             overrides: tuple[str, ...], config_file: str | None) -> None:
    """What went wrong in a run or a log, at which step, why, and what to do.

    PATHS: stethoscope runs, or logs other tools wrote (HF trainer_state.json, TensorBoard event files,
    Lightning metrics.csv, W&B/generic CSV, JSONL, Megatron/NeMo/nanoGPT/llm.c/fairseq/NeoX/litgpt logs),
    files or directories.
    """
    from stethoscope.cli.diagnosis import detect_config, diagnose_paths

    ctx.exit(diagnose_paths(paths, as_json, fail_on, rank, detect_config(config_file, overrides)))


@cli.command()
@click.argument("logfile", type=click.Path(allow_dash=True))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--fail-on", type=_FAIL_ON, default="never", show_default=True)
@click.pass_context
def explain(ctx: click.Context, logfile: str, as_json: bool, fail_on: str) -> None:
    """Name the failure in a crash log or traceback (LOGFILE, or - for stdin), with cause and fix."""
    from stethoscope.cli.diagnosis import explain_source

    ctx.exit(explain_source(logfile, as_json, fail_on))


@cli.command("import")
@click.argument("path", type=click.Path())
@click.option("--into", "into", required=True, type=click.Path(file_okay=False), help="Run directory to create.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def import_(path: str, into: str, as_json: bool) -> None:
    """Read a foreign log into a stethoscope run store (then show/query/diagnose/report it)."""
    from stethoscope.cli.diagnosis import import_source

    import_source(path, into, as_json)


@cli.command()
@click.argument("path", type=click.Path())
@click.option("-o", "--out", default="report.html", show_default=True, type=click.Path(dir_okay=False))
@click.option("--rank", type=int, default=None, help="Which rank of a multi-rank run (default: the lowest).")
@_detect_options
def report(path: str, out: str, rank: int | None, overrides: tuple[str, ...], config_file: str | None) -> None:
    """One self-contained HTML report (curves, findings marked on them, causes and fixes, metadata)."""
    from stethoscope.cli.diagnosis import detect_config, write_report

    click.echo(f"report written to {write_report(path, out, rank, detect_config(config_file, overrides))}")


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("-o", "--out", default="compare.html", show_default=True, type=click.Path(dir_okay=False))
@_detect_options
def compare(paths: tuple[str, ...], out: str, overrides: tuple[str, ...], config_file: str | None) -> None:
    """Side by side: the config keys that differ, outcomes, and overlaid curves (HTML)."""
    from stethoscope.cli.diagnosis import detect_config, print_compare, write_compare

    target, inputs = write_compare(paths, out, detect_config(config_file, overrides))
    print_compare(inputs)
    click.echo(f"comparison written to {target}")


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="stethoscope")


if __name__ == "__main__":
    main(sys.argv[1:])

