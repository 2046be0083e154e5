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


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="stethoscope")


if __name__ == "__main__":
    main(sys.argv[1:])

