"""Live export inside the training process: every durable point and finding reaches the exporters,
and a failing exporter never reaches the training loop."""

from __future__ import annotations

import logging

import pytest

from stethoscope.testing import MemoryExporter
from tests.exporters.conftest import STEPS, record, store_series


def test_every_point_and_finding_reaches_the_exporters(tmp_path):
    memory = MemoryExporter()
    mon = record(tmp_path / "exp1", export=[memory], config={"lr": 1e-3})
    assert mon.exports is not None and memory.context.run == "exp1" and memory.context.config == {"lr": 1e-3}
    mon.close()
    assert memory.closed
    got: dict[str, dict[int, float]] = {}
    for name, step, value, _t in memory.points:
        got.setdefault(name, {})[step] = value
    want = store_series(tmp_path / "exp1")
    assert set(got) == set(want)
    assert {s: v for s, v in got["train/loss"].items() if v == v} == {s: v for s, v in want["train/loss"].items() if v == v}
    from stethoscope.store.query import open_run

    with open_run(tmp_path / "exp1") as run:
        stored = run.query("SELECT type, step, message FROM findings ORDER BY id")[1]
    assert [(f.type, f.step, f.message) for f in memory.findings] == stored
    assert ("nan", 30) in [(f.type, f.step) for f in memory.findings]


def test_a_failing_exporter_is_counted_and_the_run_goes_on(tmp_path, caplog):
    broken, memory = MemoryExporter(fail=True), MemoryExporter()
    with caplog.at_level(logging.WARNING):
        mon = record(tmp_path / "exp1", export=[broken, memory], strict=True)  # strict: our own errors would raise
        mon.close()
    assert mon.exports.errors >= 1 and mon.internal_errors == 0
    logged = [r for r in caplog.records if "the tracking server went away" in r.getMessage()]
    assert len(logged) == 1  # logged once, then only counted
    assert len({step for _, step, _, _ in memory.points}) == STEPS  # the other exporter got everything
    assert store_series(tmp_path / "exp1")["train/loss"]  # and the store too


def test_an_exporter_that_cannot_start_is_left_out(tmp_path, caplog):
    import socket

    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        with caplog.at_level(logging.WARNING):
            mon = record(tmp_path / "exp1", prometheus_port=busy.getsockname()[1])
            mon.close()
    finally:
        busy.close()
    assert "could not start the Prometheus exporter" in caplog.text
    assert len(store_series(tmp_path / "exp1")["train/loss"]) == STEPS


def test_not_an_exporter_is_refused_before_anything_starts(tmp_path):
    with pytest.raises(ValueError, match="exporter object"):
        record(tmp_path / "exp1", export=[object()])
    assert not (tmp_path / "exp1").exists()  # nothing created: fixing the typo records into exp1, not exp1-2
