"""The one truth about a run: `run_incidents` computes its incidents once, and every view renders that result
(`show`, `runs`, `diagnose`, `compare`, `report`, `watch`, the dashboard, the demo). A stored run's findings
are what its live detectors recorded combined with a replay of its kept metrics (the recorded word wins,
`findings.pipeline.combine`); an imported log has no recorded findings and is diagnosed by the replay alone;
the incidents a rollback abandoned are kept and say so, with the rollback they caused."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stethoscope.records import Finding
from stethoscope.store.query import RunReader, is_run, open_run

if TYPE_CHECKING:
    from stethoscope.detect.config import DetectConfig
    from stethoscope.diagnose.engine import Diagnosis


def run_incidents(reader: RunReader, rank: int | None = None, config: DetectConfig | None = None,
                  pending: Sequence[Finding] = ()) -> Diagnosis:
    """The incidents of one rank (the lowest by default) of a stored run, live, finished, rolled back or
    imported: findings ranked by severity then step (causes, fixes and stored batch ids attached), verdicts
    and the curve's class. The replay uses `config`, else the thresholds the run's Monitor recorded
    (`recorded_config`), else the defaults. `pending`: live findings made but not stored yet (the ones a run's
    end makes, while its alerts go out), taken as recorded after the stored ones."""
    from stethoscope.diagnose.batches import attach_batch_ids, store_lookup
    from stethoscope.diagnose.engine import conclude_run
    from stethoscope.diagnose.sources import from_store

    run = from_store(reader, rank)
    others = rank is None
    rank = reader.ranks[0] if rank is None else rank
    config = config if config is not None else recorded_config(reader, rank)
    recorded = recorded_findings(reader, rank)
    if others:
        recorded += other_ranks(reader, recorded)
    d = conclude_run(run, recorded + _failure(reader.meta(rank)) + list(pending), config, _rollbacks(reader, rank))
    attach_batch_ids(d.findings, store_lookup(reader.query, rank))
    return d


def other_ranks(reader: RunReader, recorded: Sequence[Finding], near: int = 2) -> list[Finding]:
    """What the live detectors of the other ranks recorded at warning or above that the lowest rank's did not (not
    of that type within `near` steps): a NaN on rank 1 alone is the run's problem, named 'on rank k' in every view
    (user-trial-4: every view called such a run healthy). A problem every rank saw is said once, by the lowest."""
    import dataclasses

    from stethoscope.records import severity_rank

    seen = [(f.type, f.step) for f in recorded]
    out: list[Finding] = []
    for k in reader.ranks[1:]:
        for f in recorded_findings(reader, k):
            if severity_rank(f.severity) < 1:
                continue
            if any(t == f.type and (s is None or f.step is None or abs(s - f.step) <= near) for t, s in seen):
                continue
            seen.append((f.type, f.step))
            out.append(dataclasses.replace(f, message=f"on rank {k}: {f.message}", evidence={**f.evidence, "rank": k}))
    return out


def _failure(meta: dict[str, str]) -> list[Finding]:
    """The exception a run ended with (its status `failed: …`, which `show` prints), named as `stethoscope explain`
    names it, at the run's last step: a crashed run is no 'healthy' run in any view (user-trial-3)."""
    import dataclasses

    from stethoscope.explain import explain_text
    from stethoscope.findings.catalogue import CRASH

    error = (meta.get("status") or "").removeprefix("failed:").strip()
    if not (meta.get("status") or "").startswith("failed:") or not error:
        return []
    step = int(meta["last_step"]) if str(meta.get("last_step", "")).lstrip("-").isdigit() else None
    found = explain_text(error, "the run's status") or [Finding(
        CRASH, "error", step, f"the run ended with an exception: {error}",
        causes=["an exception raised in the training script (the traceback is in the run's own output)"],
        fixes=["read the traceback in the run's output; `stethoscope explain LOG` names common failures"])]
    return [dataclasses.replace(f, step=step if f.step is None else f.step) for f in found]


def incidents_at(path: str | os.PathLike[str], rank: int | None = None,
                 config: DetectConfig | None = None) -> list[Diagnosis]:
    """`run_incidents` of a run directory, or the diagnosis of every log a foreign file or folder holds."""
    from stethoscope.diagnose.engine import diagnose_run
    from stethoscope.diagnose.sources import load

    if is_run(Path(path)):
        with open_run(path) as reader:
            return [run_incidents(reader, rank, config)]
    return [diagnose_run(run, config) for run in load(path, rank)]


def recorded_config(reader: RunReader, rank: int | None = None) -> DetectConfig | None:
    """The thresholds the run's live detectors ran with, as its Monitor recorded them; None for a run that
    recorded none (imported, detection off, or written before they were recorded)."""
    from stethoscope.detect.config import META_KEY, DetectConfig

    text = reader.meta(rank).get(META_KEY)
    try:
        return DetectConfig.from_recorded(json.loads(text)) if text else None
    except ValueError:
        return None


def run_findings(reader: RunReader) -> list[Finding]:
    """The findings of `run_incidents` (the lowest rank)."""
    return run_incidents(reader).findings


def recorded_findings(reader: RunReader, rank: int | None = None) -> list[Finding]:
    """What the live detectors recorded, every row in order (follow-ups unmerged); those of steps a rollback
    abandoned say so (`findings.superseded`)."""
    from stethoscope.findings.superseded import mark_abandoned

    rank = reader.ranks[0] if rank is None else rank
    _, rows = reader.query("SELECT id, data FROM findings WHERE rank = ? AND data IS NOT NULL ORDER BY id", (rank,))
    found = [(i, f) for i, d in rows for f in _parsed([(d,)])]
    ranges = reader.superseded(rank)
    return mark_abandoned(found, ranges) if ranges else [f for _, f in found]


def _rollbacks(reader: RunReader, rank: int) -> list[tuple[int | None, dict[str, Any]]]:
    """The recovery's records (rollback, recovered, gave_up), in order."""
    _, rows = reader.query("SELECT step, data FROM events WHERE rank = ? AND kind = 'recovery' AND data IS NOT NULL "
                           "ORDER BY id", (rank,))
    out = []
    for step, data in rows:
        try:
            d = json.loads(data)
        except ValueError:
            continue
        if isinstance(d, dict):
            out.append((step, d))
    return out


def _parsed(rows: list[tuple[str]]) -> list[Finding]:
    """The findings among stored rows of JSON (an event that is not a finding, written by a later
    version say, is left out)."""
    found = []
    for (data,) in rows:
        try:
            found.append(Finding.from_dict(json.loads(data)))
        except (ValueError, TypeError, KeyError):
            continue
    return found


def live_findings(reader: RunReader) -> list[Finding]:
    """Only what the live detectors recorded (with the run's own thresholds, or none when detection was
    off), through the same pipeline: the recorded input of `run_incidents`, for tests of live detection.
    Views print `run_incidents`."""
    from stethoscope.diagnose.batches import attach_batch_ids, store_lookup
    from stethoscope.findings.advice import advise
    from stethoscope.findings.pipeline import finalise, ranked

    findings = finalise(recorded_findings(reader))
    attach_batch_ids(findings, store_lookup(reader.query, reader.ranks[0]))  # before advice: it names a bad batch
    return ranked([advise(f) for f in findings])
