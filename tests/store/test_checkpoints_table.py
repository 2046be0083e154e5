"""The `checkpoints` table `query` offers holds the saves the run recorded (user-trial-4: it was empty for a run
with checkpoints every 10 steps, while `ckpt list` and the events showed them)."""

from __future__ import annotations

import json

import pytest

from stethoscope import Checkpoints, Monitor, open_run

torch = pytest.importorskip("torch")


def test_each_save_is_a_row_and_retention_marks_the_deleted(tmp_path):
    torch.set_num_threads(1)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with Monitor(tmp_path / "run", model, opt, serve=False,
                 checkpoints=Checkpoints(tmp_path / "ck", every=10, keep_last=2)) as mon:
        for step in range(50):
            loss = model(torch.ones(2, 4)).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            mon.step(step, loss=loss)
    with open_run(tmp_path / "run") as reader:
        _, rows = reader.query("SELECT step, path, bytes, status FROM checkpoints ORDER BY step")
        _, events = reader.query("SELECT step, data FROM events WHERE kind = 'checkpoint' ORDER BY step")
    assert [r[0] for r in rows] == [e[0] for e in events] and len(rows) >= 3
    assert [r[1] for r in rows] == [json.loads(e[1])["path"] for e in events]
    on_disk = sorted(p.name for p in (tmp_path / "ck").glob("step-*"))
    kept = sorted(r[1].rsplit("/", 1)[-1] for r in rows if r[3] == "saved")
    assert kept == on_disk and all(r[2] > 0 for r in rows)
    assert {r[3] for r in rows} == {"saved", "deleted"}


def test_a_rollback_marks_the_checkpoints_it_set_aside(tmp_path):
    from stethoscope.store.db import RunStore, rank_path

    store = RunStore(rank_path(tmp_path / "r", 0))
    saves = [(s, 0.0, "checkpoint", "info", "checkpoints", "saved",
              {"path": f"ck/step-{s:08d}", "bytes": 10, "metrics": {}, "deleted": []}) for s in (10, 20, 30)]
    store.write_events(iter(saves))  # a generator of events, as write_findings gives
    store.write_events([(20, 0.0, "rollback", "warning", "recovery", "rolled back",
                         {"step": 20, "before": 35, "superseded": [30], "lr_factor": None})])
    store.close()
    with open_run(tmp_path / "r") as reader:
        _, rows = reader.query("SELECT step, status FROM checkpoints ORDER BY step")
    assert rows == [(10, "saved"), (20, "saved"), (30, "superseded")]
