from __future__ import annotations

import threading

import pytest

from stethoscope.errors import InternalError
from stethoscope.record.queue import BoundedQueue
from stethoscope.record.writer import Recorder
from stethoscope.records import QUEUE_DROPS, Finding
from stethoscope.store.db import RunStore, rank_path
from stethoscope.store.query import open_run


def test_queue_drops_and_counts_when_full():
    q = BoundedQueue(maxsize=3)
    assert [q.put(i) for i in range(5)] == [True, True, True, False, False]
    assert q.dropped == 2 and len(q) == 3
    q.put_control("marker")  # control items pass the bound
    assert q.drain() == [0, 1, 2, "marker"]


def test_flush_makes_everything_before_it_durable(tmp_path):
    rec = Recorder(RunStore(rank_path(tmp_path, 0)), flush_interval=60.0)  # the interval never fires here
    for i in range(5000):
        rec.put_point("train/loss", i, float(i), None)
    assert rec.flush(10)
    with open_run(tmp_path) as r:
        assert r.query("SELECT COUNT(*), MAX(step) FROM metrics")[1] == [(5000, 4999)]
    rec.close()


def test_interval_alone_makes_points_durable(tmp_path):
    rec = Recorder(RunStore(rank_path(tmp_path, 0)), flush_interval=0.2)
    rec.put_point("train/loss", 1, 1.0, None)
    deadline = threading.Event()
    for _ in range(50):
        with open_run(tmp_path) as r:
            if r.query("SELECT COUNT(*) FROM metrics")[1] == [(1,)]:
                break
        deadline.wait(0.05)
    else:
        pytest.fail("point not durable within the flush interval")
    rec.close()


def test_drops_are_exposed_as_a_metric(tmp_path):
    rec = Recorder(RunStore(rank_path(tmp_path, 0)), flush_interval=60.0, max_queue=10)
    # 10,000 puts inside one GIL slice (5 ms) overrun a queue of 10 whatever the writer does.
    for i in range(10_000):
        rec.put_point("x", i, 1.0, None)
    rec.close()
    dropped = rec.queue.dropped
    assert dropped > 0
    with open_run(tmp_path) as r:
        assert r.query(f"SELECT value FROM metrics WHERE name = '{QUEUE_DROPS}'")[1] == [(float(dropped),)]
        assert r.query("SELECT COUNT(*) FROM metrics WHERE name = 'x'")[1] == [(10_000 - dropped,)]


def test_close_is_idempotent_and_flush_after_close_is_harmless(tmp_path):
    rec = Recorder(RunStore(rank_path(tmp_path, 0)))
    rec.close()
    rec.close()
    assert rec.flush() is False


class _Boom:
    def observe(self, points):
        raise RuntimeError("observer bug")

    def finish(self):
        return [Finding("nan", "critical", 3, "found at the end")]


def test_failures_are_counted_not_raised_unless_strict(tmp_path):
    rec = Recorder(RunStore(rank_path(tmp_path, 0)))
    rec.observers.append(_Boom())
    rec.put_point("train/loss", 1, 1.0, None)
    assert rec.flush()
    assert rec.errors == 1
    rec.close()
    with open_run(tmp_path) as r:
        assert r.query("SELECT type, step FROM findings")[1] == [("nan", 3)]
        assert r.query("SELECT value FROM metrics WHERE name = 'stethoscope/internal_errors'")[1] == [(1.0,)]

    strict = Recorder(RunStore(rank_path(tmp_path / "s", 0)), strict=True)
    strict.observers.append(_Boom())
    strict.put_point("train/loss", 1, 1.0, None)
    with pytest.raises(InternalError, match="observer bug"):
        strict.flush()
    strict.close()
