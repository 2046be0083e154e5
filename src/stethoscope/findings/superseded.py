"""Findings of steps a rollback abandoned: kept (they are why it rolled back), marked as such.

A stored run's `superseded` table names the ranges (see `store/schema.py`); a finding recorded before
the rollback (event id at most its `last_event`) at a step inside one belongs to the abandoned path:
its incident ended there, by the rollback, whatever the detectors last said about it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from stethoscope.records import Finding


def mark_abandoned(found: Sequence[tuple[int, Finding]], ranges: Sequence[tuple[int, int, int, int | None]]) -> list[Finding]:
    """`found`: (event id, finding) in the order recorded; `ranges`: (from_step, to_step, rollback, last event id)."""
    out = []
    for event_id, f in found:
        hit = next((r for r in ranges if f.step is not None and r[0] <= f.step <= r[1]
                    and (r[3] is None or event_id <= r[3])), None)
        if hit is None:
            out.append(f)
            continue
        from_step, to_step, rollback, _ = hit
        ev = {**f.evidence, "rolled_back": rollback, "rolled_back_to": from_step - 1}
        end = f.end_step if f.end_step is not None else to_step
        msg = f"{f.message}; rolled back to step {from_step - 1} (rollback {rollback}): the steps after it were abandoned"
        out.append(dataclasses.replace(f, evidence=ev, end_step=end, message=msg))
    return out
