"""`stethoscope diagnose`, `explain`, `import`, `report` and `compare`: the verbs (their work: diagnosis.py)."""

from __future__ import annotations

import click

from stethoscope.cli.options import (EXIT_STATUS, EXIT_STATUS_NO_FAIL_ON, FAIL_ON, MIN_SEVERITY_HELP, SEVERITY,
                                     detect_options)


@click.command(epilog=EXIT_STATUS)
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="One JSON object per input (a list for several).")
@click.option("--fail-on", type=FAIL_ON, default="never", show_default=True,
              help="Exit 1 when a finding is at or above this severity.")
@click.option("--min-severity", type=SEVERITY, default=None, help=MIN_SEVERITY_HELP)
@click.option("--rank", type=int, default=None, help="Which rank of a multi-rank run (default: the lowest).")
@detect_options
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


@click.command(epilog=EXIT_STATUS)
@click.argument("logfile", type=click.Path(allow_dash=True))
@click.option("--json", "as_json", is_flag=True, help="Print {path, findings} as JSON.")
@click.option("--fail-on", type=FAIL_ON, default="never", show_default=True,
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


@click.command("import", epilog=EXIT_STATUS_NO_FAIL_ON)
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


@click.command(epilog=EXIT_STATUS_NO_FAIL_ON)
@click.argument("path", type=click.Path())
@click.option("-o", "--out", default="report.html", show_default=True, type=click.Path(dir_okay=False),
              help="The HTML file to write.")
@click.option("--rank", type=int, default=None, help="Which rank of a multi-rank run (default: the lowest).")
@detect_options
def report(path: str, out: str, rank: int | None, overrides: tuple[str, ...], config_file: str | None) -> None:
    """One self-contained HTML report: curves, findings marked on them, causes and fixes, metadata.

    \b
    Examples:
      stethoscope report runs/demo -o report.html
      stethoscope report output/trainer_state.json -o hf.html
    """
    from stethoscope.cli.diagnosis import detect_config, write_report

    click.echo(f"report written to {write_report(path, out, rank, detect_config(config_file, overrides))}")


@click.command(epilog=EXIT_STATUS_NO_FAIL_ON)
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("-o", "--out", default="compare.html", show_default=True, type=click.Path(dir_okay=False),
              help="The HTML file to write.")
@detect_options
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


COMMANDS = [diagnose, explain, import_, report, compare]
