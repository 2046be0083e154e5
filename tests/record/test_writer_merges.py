"""The writer gathers the batch ids handed over every log_every steps into one store transaction a wake (they
commute with the points: another table, no observer reads them), after the points before them; a flush
marker or any other call still cuts the queue in order (issue 28.2: the writer's GIL time per step)."""

from __future__ import annotations

from stethoscope.record.writer import Recorder
from stethoscope.store.db import RunStore, rank_path
from stethoscope.store.query import open_run


class CountingStore(RunStore):
    """The real store, counting its transactions of points and batch ids."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[str, int]] = []

    def write_batches(self, batches):
        batches = list(batches)
        self.calls.append(("batches", len(batches)))
        super().write_batches(batches)

    def write_columns(self, names, *rest):
        self.calls.append(("points", len(names)))
        return super().write_columns(names, *rest)


def test_batch_ids_of_one_wake_go_in_one_transaction_after_the_points(tmp_path) -> None:
    store = CountingStore(rank_path(tmp_path, 0), t0=1e9)
    rec = Recorder(store, flush_interval=60.0)  # the writer waits for the flush below: one wake
    try:
        for flush in range(5):
            for step in range(10 * flush, 10 * flush + 10):
                rec.put_many({"train/loss": float(step), "opt/lr": 0.1}, step, 1e9 + step)
            rec.call("write_batches", [(s, [s, s + 1]) for s in range(10 * flush, 10 * flush + 10)], wake=False)
        rec.call("set_meta", {"note": "a call that is not beside the points cuts the queue"})
        rec.put_many({"train/loss": 99.0}, 50, 1e9 + 50)
        rec.call("write_batches", [(50, [7])], wake=False)
        assert rec.flush(30)
    finally:
        rec.close()
    assert store.calls == [("points", 100), ("batches", 50), ("points", 1), ("batches", 1)]
    with open_run(tmp_path) as run:
        assert run.series("train/loss")[0] == list(range(51))
        _, rows = run.query("SELECT step, ids FROM batches ORDER BY step")
        assert [r[0] for r in rows] == list(range(51)) and rows[3][1] == "[3, 4]"
        _, meta = run.query("SELECT value FROM run WHERE key = 'note'")
        assert meta
