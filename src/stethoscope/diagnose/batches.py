"""Name the samples of a bad batch: findings at a step get the batch ids the Monitor stored for it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

from stethoscope.findings.catalogue import DIVERGENCE, GRAD_EXPLOSION, GRAD_SPIKE, LOSS_SPIKE, NAN
from stethoscope.records import Finding

# Findings a single batch can cause, and how many ids to show. A divergence is one when it is a jump at one step
# whose level never came back (detect.spike_level: evidence `spike_step`), as after a garbage batch's update.
BATCH_TYPES = frozenset({LOSS_SPIKE, NAN, GRAD_SPIKE, GRAD_EXPLOSION})
MAX_IDS = 32

Lookup = Callable[[int], "list[object] | None"]


def attach_batch_ids(findings: Iterable[Finding], lookup: Lookup) -> None:
    """Add `evidence["batch_ids"]` (in place) and, when nothing led up to it, name the batch as the cause."""
    for f in findings:
        if f.step is None or (f.type not in BATCH_TYPES and not (
                f.type == DIVERGENCE and f.evidence.get("spike_step") == f.step)):
            continue
        ids = lookup(f.step)
        if not ids:
            continue
        f.evidence["batch_ids"] = ids[:MAX_IDS]
        if _no_lead_up(f):
            shown = ", ".join(map(str, ids[:8])) + (", …" if len(ids) > 8 else "")
            f.causes.insert(0, f"no lead-up: a single bad batch at step {f.step} (samples {shown}); "
                               "inspect those samples and skip them on resume")


def _no_lead_up(f: Finding) -> bool:
    said = " ".join(f.causes)
    return not any(k in said for k in ("rose", "warm-up and rising", "LR jumped", "LR still"))


def store_lookup(query: Callable[..., tuple[list[str], list[tuple]]], rank: int) -> Lookup:
    """A lookup over a run store's `batches` table (through a RunReader's query)."""

    def lookup(step: int) -> list[object] | None:
        _, rows = query("SELECT ids FROM batches WHERE rank = ? AND step = ?", (rank, step))
        if not rows:
            return None
        try:
            ids = json.loads(rows[0][0])
        except ValueError:
            return None
        return ids if isinstance(ids, list) else None

    return lookup
