"""`stethoscope query RUN_A RUN_B … "SQL"`, `query RUN --ranks all "SQL"`, `query EXPORT "SQL"`: DuckDB."""

from __future__ import annotations

import os
from typing import Any

import click

from stethoscope.errors import UsageError


def split_args(args: tuple[str, ...]) -> tuple[list[str], str | None]:
    """RUN… [SQL]: the last argument is the SQL when there are several and it names no existing path."""
    if len(args) > 1 and not os.path.exists(args[-1]):
        return list(args[:-1]), args[-1]
    return list(args), None


def wants_fleet(runs: list[str], ranks: str | None) -> bool:
    """Several runs, --ranks, or a Parquet export go through DuckDB; one run alone keeps the SQLite reader."""
    from stethoscope.store.export import is_export

    return ranks is not None or len(runs) > 1 or any(is_export(r) for r in runs)


def fleet_query(runs: list[str], sql: str | None, ranks: str | None, schema: bool) -> tuple[list[str], list[Any]]:
    from stethoscope.store.fleet import FleetQuery, parse_ranks, sources
    from stethoscope.store.schema import schema_rows

    chosen = parse_ranks(ranks)
    found = sources(runs)
    if schema:
        rows = [r for t, c, u in schema_rows()
                for r in ([(t, "run", "run name (its folder, or its name in the export)")] if c == "rank" else [])
                + [(t, c, u)]]
        return ["table", "column", "unit / meaning"], rows
    if not sql or not sql.strip():
        raise UsageError(f"no SQL given; e.g. \"SELECT run, rank, max(step) FROM metrics GROUP BY ALL\" (tables and "
                         f"columns: stethoscope query {runs[0]} --ranks all --schema)")
    with FleetQuery(found, chosen) as q:
        cols, rows = q.query(sql)
        for problem in q.skipped:
            click.echo(f"stethoscope: warning: skipped {problem}", err=True)
        for note in q.notes:
            click.echo(f"stethoscope: note: {note}", err=True)
    return cols, rows
