"""What counts as a finding is one list (schema.NOT_FINDINGS), read the same by the view, the run reader, the
Arrow/DuckDB readers and `watch`, also for stores an older version wrote with its own view."""

from __future__ import annotations

import sqlite3

from stethoscope.records import Finding
from stethoscope.store import arrow, tail
from stethoscope.store.db import RunStore, rank_path
from stethoscope.store.query import open_run


def _store(run):
    s = RunStore(rank_path(run, 0))
    s.write_points([("train/loss", i, 1.0, None) for i in range(5)])
    s.write_findings([Finding("loss_spike", "warning", 3, "spike at 3")])
    s.write_events([(1, None, "log_line", "info", "import", "WARNING: OVERFLOW", {"line": 7}),
                    (2, None, "checkpoint_loaded", "info", "checkpoint", "resumed", None),
                    (4, None, "recovery", "warning", "recovery", "rolled back", None),
                    (4, None, "debug", "info", "debug", "report", None)])
    s.close()


def _old_view(run):
    """The findings view as an older version wrote it: log lines, recoveries and debug reports in it."""
    con = sqlite3.connect(rank_path(run, 0))
    con.executescript("DROP VIEW findings; CREATE VIEW findings AS SELECT id, step, time, kind AS type, severity, "
                      "source, message, data FROM events WHERE kind NOT IN ('alert', 'lifecycle', 'checkpoint', "
                      "'rollback');")
    con.close()


def test_only_detector_findings_are_findings_everywhere(tmp_path):
    for run, old in ((tmp_path / "new", False), (tmp_path / "old", True)):
        _store(run)
        if old:
            _old_view(run)
        with open_run(run) as r:
            assert r.query("SELECT type FROM findings")[1] == [("loss_spike",)], run
        con = arrow.connect(rank_path(run, 0))
        assert arrow.read(con, "findings").column("type").to_pylist() == ["loss_spike"]
        con.close()
        snap = tail.read(run)
        assert [f["type"] for f in snap.findings] == ["loss_spike"] and snap.counts == {"warning": 1}


def test_a_writer_reopening_an_old_store_brings_its_view_up_to_date(tmp_path):
    _store(tmp_path)
    _old_view(tmp_path)
    RunStore(rank_path(tmp_path, 0)).close()
    con = sqlite3.connect(rank_path(tmp_path, 0))
    assert con.execute("SELECT type FROM findings").fetchall() == [("loss_spike",)]
    con.close()
