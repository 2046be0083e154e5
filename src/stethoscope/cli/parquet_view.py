"""`stethoscope export parquet RUN… DEST`: runs as Hive-partitioned Parquet, appendable while they run."""

from __future__ import annotations

from pathlib import Path

import click

from stethoscope.cli import render

EXIT_STATUS = """\b
Exit status: 0 fine, 2 usage or input error (one line on stderr naming the file and the problem)."""


@click.command("parquet", epilog=EXIT_STATUS)
@click.argument("paths", nargs=-1, required=True, type=click.Path(), metavar="RUN... DEST")
@click.option("--name", default=None, help="The run's name in the export (one RUN only) [default: its folder name].")
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True,
              help="Ranks exported at once, each in its own process.")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
def parquet(paths: tuple[str, ...], name: str | None, jobs: int, as_json: bool) -> None:
    """Runs as Hive-partitioned Parquet (appends).

    Writes DEST/metrics/run=…/rank=…/part-*.parquet (zstd, one row group per metric chunk) and the same for
    events, findings, series and run, for DuckDB, Spark, Trino or pyarrow. Run it again (by hand, from
    cron, while the run trains) to append only what is new: a watermark per run and rank in
    DEST/_stethoscope_export.json. Query the result with `stethoscope query DEST "SQL"`.

    \b
    Examples:
      stethoscope export parquet runs/demo fleet/
      stethoscope export parquet runs/exp1 runs/exp2 fleet/ --jobs 8 --json
      stethoscope query fleet/ "SELECT run, rank, max(step) FROM metrics GROUP BY ALL"
    """
    from stethoscope.errors import UsageError
    from stethoscope.store.export import export_runs

    if len(paths) < 2:
        raise UsageError("give one or more runs and then the destination directory (RUN... DEST)")
    from stethoscope.cli.listing import find_runs, one_run

    dest = paths[-1]  # a folder of runs (an imported log of several runs): each of its runs
    runs = tuple(str(d) for given in paths[:-1] for d in (find_runs(Path(given)) if Path(given).is_dir() else [])
                 or [one_run(given, "export parquet")])
    if name is not None and len(runs) != 1:
        raise UsageError("--name names one run; give a single RUN with it")
    result = export_runs(runs, dest, None if name is None else [name], jobs=jobs)
    for problem in result.skipped:
        click.echo(f"stethoscope: warning: skipped {problem}", err=True)
    cols = ["run", "rank", "metrics", "events", "findings", "files", "bytes", "rewritten"]
    rows = [(r.run, r.rank, r.rows.get("metrics", 0), r.rows.get("events", 0), r.rows.get("findings", 0),
             r.files, r.bytes, r.rewritten) for r in result.ranks]
    if as_json:
        click.echo(render.rows_json(cols, rows))
        return
    render.console().print(render.rows_table(cols, rows, title=f"new rows exported to {result.dest}"))
