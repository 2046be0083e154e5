"""The findings of a stored run, as `diagnose`, `show`, the dashboard and the demo report them: an
imported log diagnosed again, a recorded run's live findings through the same pipeline."""

from __future__ import annotations

import json

from stethoscope.records import Finding
from stethoscope.store.query import RunReader


def run_findings(reader: RunReader) -> list[Finding]:
    """What `stethoscope diagnose` says about this run, with the stored batch ids attached: an imported log
    is diagnosed by the same call; a recorded run keeps what its live detectors found (the same detectors,
    no replay of a long run) and gets the same merge, run-level verdicts, advice and ranking."""
    from stethoscope.diagnose.batches import attach_batch_ids, store_lookup
    from stethoscope.diagnose.engine import conclude_run, diagnose_run
    from stethoscope.diagnose.sources import from_store

    run = from_store(reader)
    if run.meta.get("source_format"):
        findings = diagnose_run(run).findings
    else:
        findings = conclude_run(run, _recorded(reader)).findings
    attach_batch_ids(findings, store_lookup(reader.query, reader.ranks[0]))
    return findings


def _recorded(reader: RunReader) -> list[Finding]:
    """The live findings; those of steps a rollback abandoned say so (`findings.superseded`)."""
    from stethoscope.findings.superseded import mark_abandoned

    _, rows = reader.query("SELECT id, data FROM findings WHERE rank = ? AND data IS NOT NULL ORDER BY id",
                           (reader.ranks[0],))
    ranges = reader.superseded()
    if not ranges:
        return _parsed([(d,) for _, d in rows])
    found = [(i, f) for i, d in rows for f in _parsed([(d,)])]
    return mark_abandoned(found, ranges)


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
    """The findings the live detectors recorded in the store (the Monitor's thresholds), through the same
    pipeline, most severe first. `show` prints `run_findings` instead: what `diagnose` says."""
    from stethoscope.diagnose.batches import attach_batch_ids, store_lookup
    from stethoscope.diagnose.knowledge import advise
    from stethoscope.findings.pipeline import finalise, ranked

    _, rows = reader.query("SELECT data FROM findings WHERE data IS NOT NULL ORDER BY id")
    findings = finalise(_parsed(rows))
    attach_batch_ids(findings, store_lookup(reader.query, reader.ranks[0]))  # before advice: it names a bad batch
    return ranked([advise(f) for f in findings])
