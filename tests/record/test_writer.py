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


def test_a_batch_weighs_its_points_against_the_bound():
    q = BoundedQueue(maxsize=10)
    assert q.put_batch("step 0", 6) and len(q) == 6
    assert not q.put_batch("step 1", 5)  # 11 points would not fit: dropped whole, counted per point
    assert q.dropped == 5 and len(q) == 6
    assert q.put("a point") and q.put_batch("step 2", 3) and len(q) == 10
    assert not q.put("one more") and q.dropped == 6
    items = q.drain()
    for item in items:
        q.taken({"step 0": 6, "step 2": 3}.get(item, 1))
    assert items == ["step 0", "a point", "step 2"] and len(q) == 0
    assert q.put_batch("step 3", 10)


def test_put_many_steps_interleaved_with_points_are_stored_in_order(tmp_path):
    rec = Recorder(RunStore(rank_path(tmp_path, 0), t0=1e9), flush_interval=60.0)
    for i in range(3000):
        rec.put_many({"a": float(i), "b": None if i % 7 == 0 else 2.0 * i}, i, 1e9 + i)
        rec.put_point("c", i, -float(i), None)
    rec.put_many({"a": -1.0}, 10, None)  # a step recorded again: the old value is kept apart
    assert rec.flush(30)
    rec.close()
    with open_run(tmp_path) as r:
        got = dict(r.query("SELECT name, COUNT(*) FROM metrics GROUP BY name")[1])
        assert got == {"a": 3000, "b": 3000, "c": 3000}
        assert r.query("SELECT value, time FROM metrics WHERE name = 'a' AND step = 10")[1] == [(-1.0, None)]
        assert r.query("SELECT value FROM points_superseded")[1] == [(10.0,)]
        assert r.query("SELECT COUNT(*) FROM metrics WHERE name = 'b' AND value IS NULL")[1] == [(429,)]
        assert r.query("SELECT MAX(time) FROM metrics WHERE name = 'a' AND step < 3000 AND step != 10")[1] == \
            [(1e9 + 2999,)]


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
