"""`stethoscope runs` and `show`: the runs under a folder, and one run's summary with its findings."""

from __future__ import annotations

import click

from stethoscope.cli.options import EXIT_STATUS_NO_FAIL_ON, MIN_SEVERITY_HELP, SEVERITY


@click.command(epilog=EXIT_STATUS_NO_FAIL_ON)
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



@click.command(epilog=EXIT_STATUS_NO_FAIL_ON)
@click.argument("run", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print the summary and findings as one JSON object.")
@click.option("--min-severity", type=SEVERITY, default=None, help=MIN_SEVERITY_HELP)
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


COMMANDS = [runs, show]
