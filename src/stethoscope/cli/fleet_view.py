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
    _check_ranks(found, chosen)
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


def _check_ranks(found: list[Any], chosen: set[int] | None) -> None:
    """Ranks asked for that no run holds: none held is a typo, not an empty answer (exit 2, as `diagnose --rank`
    says it); some held (a rank file missing from a big run) reads those and says which were not there."""
    if chosen is None or any(s.export for s in found):  # an export's ranks are its partitions: not listed here
        return
    held = sorted({rank for s in found for rank, _ in s.files})
    missing = sorted(chosen - set(held))
    if not missing:
        return
    where = found[0].path if len(found) == 1 else "these runs"
    said = f"{where}: no rank {_spans(missing)} (ranks: {_spans(held)})"
    if len(missing) == len(chosen):
        raise UsageError(said)
    click.echo(f"stethoscope: warning: {said}; reading the others", err=True)


def _spans(ranks: list[int]) -> str:
    """0, 3, 8-15: sorted ranks with their runs joined."""
    out: list[str] = []
    for r in ranks:
        if out and out[-1].split("-")[-1] == str(r - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{r}"
        else:
            out.append(str(r))
    return ", ".join(out)
