"""`stethoscope query`: read-only SQL over one run (SQLite, or DuckDB over its rank files when that answers
faster) or over several runs, ranks and Parquet exports (DuckDB: fleet_view.py)."""

from __future__ import annotations

from typing import Any

import click

from stethoscope.cli import render
from stethoscope.cli.options import EXIT_STATUS_NO_FAIL_ON
from stethoscope.errors import UsageError


@click.command(epilog=EXIT_STATUS_NO_FAIL_ON)
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

    from stethoscope.cli.listing import one_run

    with open_run(one_run(run, "query")) as reader:
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


COMMANDS = [query]
