"""The `stethoscope` command. Exit status: 0 fine, 1 findings at or above --fail-on, 2 bad input."""

from __future__ import annotations

import sys
from typing import Any

import click

from stethoscope import __version__
from stethoscope.cli import render
from stethoscope.errors import StethoscopeError, UsageError
from stethoscope.records import SEVERITIES

EXIT_STATUS = """\b
Exit status: 0 fine, 1 findings at or above --fail-on, 2 usage or input error (one line on stderr naming
the file and the problem). Never a traceback: add --debug to see one."""


class Group(click.Group):
    """Verbs listed in the order a user meets them; every error one line on stderr; never a traceback
    unless --debug (anywhere on the command line)."""

    order = ("demo", "show", "diagnose", "report", "query", "runs", "compare", "import", "explain")

    def list_commands(self, ctx: click.Context) -> list[str]:
        first = [name for name in self.order if name in self.commands]
        return first + [name for name in self.commands if name not in first]

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Each verb's whole first line: click would cut it at 45 characters."""
        rows = [(name, self.commands[name].get_short_help_str(limit=200)) for name in self.list_commands(ctx)
                if not self.commands[name].hidden]
        with formatter.section("Commands"):
            formatter.write_dl(rows, col_max=12)

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        debug = "--debug" in argv
        argv = [a for a in argv if a != "--debug"]
        try:
            code = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except BaseException as exc:  # noqa: BLE001 - the one place that turns anything into one line
            code = _report(exc, debug)
        code = code if isinstance(code, int) else 0
        if not standalone_mode:
            return code
        sys.exit(code)


def _report(exc: BaseException, debug: bool) -> int:
    """One line on stderr for `exc`, and the exit status it means."""
    if isinstance(exc, SystemExit):
        return exc.code if isinstance(exc.code, int) else 0
    if debug and not isinstance(exc, click.exceptions.UsageError):
        import traceback

        traceback.print_exception(exc)
    if isinstance(exc, click.exceptions.UsageError):
        where = f"{exc.ctx.command_path} --help" if exc.ctx is not None else "stethoscope --help"
        message = exc.format_message().rstrip(".")
        _err(f"{message[:1].lower()}{message[1:]} (see: {where})")
        return 2
    if isinstance(exc, click.ClickException):
        _err(exc.format_message())
        return exc.exit_code
    if isinstance(exc, (KeyboardInterrupt, click.exceptions.Abort)):
        _err("interrupted")
        return 130
    if isinstance(exc, BrokenPipeError):  # `stethoscope query … | head`: the reader left, nothing to say
        return 0
    if isinstance(exc, StethoscopeError):
        _err(str(exc))
        return exc.exit_code
    if isinstance(exc, OSError):
        _err(f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else str(exc))
        return 2
    _err(f"could not finish ({type(exc).__name__}: {exc}); run again with --debug for the traceback, "
         "and please report it")
    return 2


def _err(message: str) -> None:
    one_line = " ".join(str(message).split())
    try:
        click.echo(f"stethoscope: error: {one_line}", err=True)
    except (BrokenPipeError, OSError):
        pass


@click.group("stethoscope", cls=Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
             epilog=EXIT_STATUS)
@click.version_option(__version__, prog_name="stethoscope")
@click.option("--debug", is_flag=True, help="Show the traceback of an error (also accepted after the verb).")
def cli(debug: bool) -> None:
    """Keeps watch over deep-learning training runs and tells you what is wrong, why, and what to do.

    \b
    Start here:
      stethoscope demo                     train a tiny GPT on CPU with stethoscope watching
      stethoscope diagnose runs/demo       what went wrong, at which step, why, what to do
      stethoscope explain slurm-1234.out   name the failure in a crash log
    """


# -- demo --------------------------------------------------------------------------------------
@cli.command(epilog=EXIT_STATUS)
@click.option("--steps", type=int, default=None, help="Training steps (about 1 minute per 1000) [1000; 400 with --recover].")
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
    from stethoscope.cli.demo_view import run_demo

    steps = steps if steps is not None else (400 if recover else 1000)
    run_demo(steps=steps, out=out, inject=inject, seed=seed, force=force, alerts=alerts, recover=recover)


# -- alerts ------------------------------------------------------------------------------------
@cli.command(epilog=EXIT_STATUS)
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
    from stethoscope.cli.alerts_view import list_alerts

    list_alerts(run, as_json, failed_only)


# -- runs / show / query -----------------------------------------------------------------------
@cli.command(epilog=EXIT_STATUS)
@click.argument("directory", required=False, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list, one object per run.")
def runs(directory: str | None, as_json: bool) -> None:
    """List the runs under DIRECTORY (default: $STETHOSCOPE_RUNS or ./runs), 3 levels down.

    A run that cannot be read is listed and marked unreadable, with the file and what is wrong.

    \b
    Examples:
      stethoscope runs
      stethoscope runs runs/ --json
    """
    from stethoscope.cli.listing import list_runs

    list_runs(directory, as_json)


_SEVERITY = click.Choice(SEVERITIES)
_MIN_SEVERITY_HELP = ("Print findings at or above this severity in full; the rest collapse into one line "
                      "[default: warning; --json: all].")


@cli.command(epilog=EXIT_STATUS)
@click.argument("run", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print the summary and findings as one JSON object.")
@click.option("--min-severity", type=_SEVERITY, default=None, help=_MIN_SEVERITY_HELP)
def show(run: str, as_json: bool, min_severity: str | None) -> None:
    """Summary of one run: last step, losses, throughput, memory, duration, and its findings.

    The findings are those `stethoscope diagnose RUN` prints (one pipeline). Ranks whose file cannot be
    read are skipped and named on stderr.

    \b
    Examples:
      stethoscope show runs/demo
      stethoscope show runs/demo --min-severity info
      stethoscope show runs/demo --json
    """
    from stethoscope.cli.listing import show_run

    show_run(run, as_json, min_severity)


@cli.command(epilog=EXIT_STATUS)
@click.argument("args", nargs=-1, required=True, metavar="RUN... [SQL]")
@click.option("--ranks", default=None, metavar="all|LIST",
              help="Read these ranks (all, or e.g. 0,3,8-15) through DuckDB, with run and rank columns.")
@click.option("--schema", is_flag=True, help="List the tables, their columns and units, and exit.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array of row objects.")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV with a header.")
@click.option("--engine", type=click.Choice(["auto", "sqlite", "duckdb"]), default="auto", show_default=True,
              help="One run: auto answers SQL over metrics/points with DuckDB when installed (fast aggregates; "
                   "SQLite when DuckDB cannot parse it).")
def query(args: tuple[str, ...], ranks: str | None, schema: bool, as_json: bool, as_csv: bool, engine: str) -> None:
    """Read-only SQL over a run: metrics, findings, alerts, events, … each with a rank column.

    Several runs, --ranks, or a Parquet export (`stethoscope export parquet`) are read by DuckDB, every
    table with run and rank columns in front. Times are unix seconds (printed as dates in the table;
    raw in --json/--csv).

    \b
    Examples:
      stethoscope query runs/demo "SELECT step, value FROM metrics WHERE name = 'train/loss' LIMIT 5" --csv
      stethoscope query runs/exp1 runs/exp2 "SELECT run, min(value) FROM metrics WHERE name = 'train/loss' GROUP BY run"
      stethoscope query runs/exp1 --ranks all --schema
    """
    from stethoscope.cli.fleet_view import fleet_query, split_args, wants_fleet

    if as_json and as_csv:
        raise UsageError("--json and --csv exclude each other")
    runs, sql = split_args(args)
    if wants_fleet(runs, ranks):
        cols, rows = fleet_query(runs, sql, ranks, schema)
    else:
        cols, rows = _query_run(runs[0], sql, schema, engine)
    if as_json:
        click.echo(render.rows_json(cols, rows))
    elif as_csv:
        click.echo(render.rows_csv(cols, rows), nl=False)
    else:
        render.console().print(render.rows_table(cols, rows))


def _query_run(run: str, sql: str | None, schema: bool, engine: str = "auto") -> tuple[list[str], list[Any]]:
    from stethoscope.store.query import open_run

    with open_run(run) as reader:
        if schema:
            from stethoscope.store.schema import schema_rows

            cols, rows = ["table", "column", "unit / meaning"], schema_rows()
        elif not sql or not sql.strip():
            raise UsageError(f"{run}: no SQL given; e.g. \"SELECT step, value FROM metrics WHERE name = "
                             f"'train/loss' LIMIT 5\" (tables and columns: stethoscope query {run} --schema)")
        else:
            cols, rows = _columnar(reader, sql, engine) or reader.query(sql)
        _warn_skipped(reader)
    return cols, rows


def _columnar(reader: Any, sql: str, engine: str) -> tuple[list[str], list[Any]] | None:
    """The answer of the DuckDB engine over the run's rank files (store/columnar.py), or None for SQLite."""
    import sqlite3

    from stethoscope.errors import QueryRefused
    from stethoscope.store import columnar

    if engine == "sqlite" or (engine == "auto" and not (columnar.wants(sql) and columnar.available())):
        return None
    try:
        result = columnar.query_ranks(list(reader.files), sql)
    except columnar.CannotAnswer as exc:
        if engine == "duckdb":
            raise QueryRefused(f"query failed (duckdb): {exc}") from None
        return None
    except sqlite3.DatabaseError:  # a rank file with damaged pages: the SQLite reader leaves it out and says so
        return None
    return columnar.sqlite_names(reader.conn, sql, result["columns"]), [tuple(r) for r in result["rows"]]


def _warn_skipped(reader: Any) -> None:
    for skipped in reader.skipped:
        click.echo(f"stethoscope: warning: skipped {skipped}", err=True)


# -- diagnosis ---------------------------------------------------------------------------------
_FAIL_ON = click.Choice(["never", "info", "warning", "error", "critical"])


def _detect_options(command: Any) -> Any:
    """--set key=value (repeatable) and --config FILE.toml: the detectors' thresholds (DetectConfig)."""
    command = click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                           help="A detector threshold, e.g. --set spike_sigma=8 (repeatable; keys: docs/diagnose.md, "
                                "'Tuning the detectors').")(command)
    return click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
                        metavar="FILE.toml", help="Detector thresholds from the [detect] table of a TOML file "
                                                  "(--set wins).")(command)


@cli.command(epilog=EXIT_STATUS)
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="One JSON object per input (a list for several).")
@click.option("--fail-on", type=_FAIL_ON, default="never", show_default=True,
              help="Exit 1 when a finding is at or above this severity.")
@click.option("--min-severity", type=_SEVERITY, default=None, help=_MIN_SEVERITY_HELP)
@click.option("--rank", type=int, default=None, help="Which rank of a multi-rank run (default: the lowest).")
@_detect_options
@click.pass_context
def diagnose(ctx: click.Context, paths: tuple[str, ...], as_json: bool, fail_on: str, min_severity: str | None,
             rank: int | None, overrides: tuple[str, ...], config_file: str | None) -> None:
    """What went wrong in a run or a log, at which step, why, and what to do.

    PATHS: stethoscope runs, or logs other tools wrote (HF trainer_state.json, TensorBoard event files,
    Lightning metrics.csv, W&B/generic CSV, JSONL, Megatron/NeMo/nanoGPT/llm.c/fairseq/NeoX/litgpt logs),
    files or directories. An input that cannot be read is named on stderr; the others are still diagnosed.

    \b
    Examples:
      stethoscope diagnose runs/demo
      stethoscope diagnose runs/demo --min-severity info --set spike_sigma=8
      stethoscope diagnose output/trainer_state.json --json --fail-on error
    """
    from stethoscope.cli.diagnosis import detect_config, diagnose_paths

    code = diagnose_paths(paths, as_json, fail_on, rank, detect_config(config_file, overrides), min_severity)
    ctx.exit(code)


@cli.command(epilog=EXIT_STATUS)
@click.argument("logfile", type=click.Path(allow_dash=True))
@click.option("--json", "as_json", is_flag=True, help="Print {path, findings} as JSON.")
@click.option("--fail-on", type=_FAIL_ON, default="never", show_default=True,
              help="Exit 1 when a finding is at or above this severity.")
@click.pass_context
def explain(ctx: click.Context, logfile: str, as_json: bool, fail_on: str) -> None:
    """Name the failure in a crash log or traceback (LOGFILE, or - for stdin), with cause and fix.

    \b
    Examples:
      stethoscope explain slurm-1234.out
      python train.py 2>&1 | stethoscope explain -
      stethoscope explain crash.log.gz --json --fail-on error
    """
    from stethoscope.cli.diagnosis import explain_source

    ctx.exit(explain_source(logfile, as_json, fail_on))


@cli.command("import", epilog=EXIT_STATUS)
@click.argument("path", type=click.Path())
@click.option("--into", "into", required=True, type=click.Path(file_okay=False),
              help="Run directory to create (one subdirectory per log when PATH holds several).")
@click.option("--json", "as_json", is_flag=True, help="Print what was imported as JSON.")
def import_(path: str, into: str, as_json: bool) -> None:
    """Read a foreign log into a stethoscope run store (then show/query/diagnose/report it).

    \b
    Examples:
      stethoscope import output/trainer_state.json --into runs/hf-exp
      stethoscope import lightning_logs/version_0 --into runs/pl-exp
    """
    from stethoscope.cli.diagnosis import import_source

    import_source(path, into, as_json)


@cli.command(epilog=EXIT_STATUS)
@click.argument("path", type=click.Path())
@click.option("-o", "--out", default="report.html", show_default=True, type=click.Path(dir_okay=False),
              help="The HTML file to write.")
@click.option("--rank", type=int, default=None, help="Which rank of a multi-rank run (default: the lowest).")
@_detect_options
def report(path: str, out: str, rank: int | None, overrides: tuple[str, ...], config_file: str | None) -> None:
    """One self-contained HTML report: curves, findings marked on them, causes and fixes, metadata.

    \b
    Examples:
      stethoscope report runs/demo -o report.html
      stethoscope report output/trainer_state.json -o hf.html
    """
    from stethoscope.cli.diagnosis import detect_config, write_report

    click.echo(f"report written to {write_report(path, out, rank, detect_config(config_file, overrides))}")


@cli.command(epilog=EXIT_STATUS)
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("-o", "--out", default="compare.html", show_default=True, type=click.Path(dir_okay=False),
              help="The HTML file to write.")
@_detect_options
def compare(paths: tuple[str, ...], out: str, overrides: tuple[str, ...], config_file: str | None) -> None:
    """Runs side by side: the config keys that differ, outcomes, and overlaid curves (HTML).

    \b
    Examples:
      stethoscope compare runs/demo runs/spike -o compare.html
      stethoscope compare lightning_logs/version_0 lightning_logs/version_1
    """
    from stethoscope.cli.diagnosis import detect_config, print_compare, write_compare

    target, inputs = write_compare(paths, out, detect_config(config_file, overrides))
    print_compare(inputs)
    click.echo(f"comparison written to {target}")


def _add_ckpt() -> None:
    from stethoscope.cli.ckpt_view import ckpt  # click and the checkpoint catalogue only: no torch

    cli.add_command(ckpt)


_add_ckpt()


def _add_export() -> None:
    from stethoscope.cli.export_view import export  # click only: each exporter loads its tool when run

    cli.add_command(export)


_add_export()


def _add_parquet() -> None:
    """`export parquet`; beside an `export` group when one exists, else in a group of its own."""
    from stethoscope.cli.parquet_view import parquet

    group = cli.commands.get("export")
    if group is None:
        group = click.Group("export", epilog=EXIT_STATUS, help="""Write runs in the formats other tools read.

    \b
    Examples:
      stethoscope export parquet runs/demo fleet/
      stethoscope export parquet runs/exp1 runs/exp2 fleet/ --jobs 8
    """)
        cli.add_command(group)
    group.add_command(parquet)


_add_parquet()


def _add_watch() -> None:
    from stethoscope.cli.watch_view import watch  # click and rich only; reads the store when run

    cli.add_command(watch)


_add_watch()


def _add_debug() -> None:
    from stethoscope.cli.debug_view import debug  # click and the store only: torch is the workflow's, when run

    cli.add_command(debug)


_add_debug()


def _add_check_data() -> None:
    from stethoscope.cli.datacheck_view import check_data  # click only: the readers load on use

    cli.add_command(check_data)


_add_check_data()


def _add_estimate() -> None:
    from stethoscope.cli.estimate_view import estimate  # click and arithmetic only: no torch

    cli.add_command(estimate)


_add_estimate()


def _add_dashboard() -> None:
    from stethoscope.cli.dashboard_view import dashboard  # the server is imported when the command runs

    cli.add_command(dashboard)


_add_dashboard()


def _add_probe() -> None:
    from stethoscope.cli.probe_view import hook, probe, ps, run  # click and the stdlib client only: no torch

    for command in (probe, ps, run, hook):
        cli.add_command(command)


_add_probe()


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="stethoscope")


if __name__ == "__main__":
    main(sys.argv[1:])

