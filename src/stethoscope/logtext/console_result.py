"""The end of a console read (`ConsoleReader.result`): the parts joined into columns, the records a batch counter
numbered in file order given their steps (`console_epochs.index_steps`), stand-ins and times named, and the
warnings and meta the read leaves (interleaved ranks, records numbered in file order, resumes)."""

from __future__ import annotations

from typing import Any

from stethoscope.logtext.columns import Columns, ImportedRun
from stethoscope.logtext.console_clock import times_named
from stethoscope.logtext.console_epochs import index_steps, renumbered
from stethoscope.logtext.stand_ins import stand_ins
from stethoscope.logtext.console_reader import NAME
from stethoscope.logtext.table import PointTable, Rejected, describe


def finish(reader: Any) -> ImportedRun:
    """The run a `ConsoleReader` read: its parts joined, a counter of batches' records renumbered, the warnings."""
    # numpy: loaded when a log is read, not when the package is imported
    from stethoscope.logtext.console_speed import join  # (a long run's rows kept as they are)

    parts: list[Any] = [Columns.empty()]  # a first part of lists: extended in place, as it always was
    rejected: list[Rejected] = []
    for part in reader.parts:
        if isinstance(part, PointTable):
            part, more = part.build_columns()
            rejected += more
        parts.append(part)
    joined, steps = reader.epochs.corrected(reader.epochs.unanchored(join(parts))), index_steps(reader.counts)
    if steps:  # the counter counts batches: the records' steps are known after all
        joined, reader.ordinal = renumbered(joined, steps), 0
    columns = stand_ins(times_named(joined, {found[0] for found in reader.names.values() if found}))
    meta: dict[str, Any] = {"confidence": round(reader.step_lines / reader.lines, 3) if reader.lines else 0.0}
    if reader.shapes:
        meta["key_consistency"] = round(reader.shapes.most_common(1)[0][1] / max(1, reader.step_lines), 3)
    warnings = list(reader.warnings)
    if len(reader.ranks) > 1:
        kept = (reader.keep_rank or b"").decode()
        others = ", ".join(r for r in sorted(reader.ranks, key=int) if r != kept)
        warnings.append(f"{reader.path}: lines of several ranks are interleaved; read rank {kept}'s "
                        f"(the first seen), left out ranks {others}")
        meta["rank"] = int(kept or 0)
    if reader.ordinal:
        warnings.append(f"{reader.path}: {reader.ordinal} metric records carry no step counter; numbered 1, 2, 3 … "
                        "in file order (the trainer's own steps are a multiple of these)")
    if reader.resumes:
        meta["resumes"] = reader.resumes
    if not columns.size:
        meta["closest"] = reader.closest()
    warnings += describe(rejected, lambda line: f"{reader.path}:{line}")
    return ImportedRun(reader.path, NAME, None, meta, warnings, reader.keeper.lines(), columns=columns)
