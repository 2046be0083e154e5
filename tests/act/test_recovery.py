"""Automatic recovery end to end: real tiny torch training, a real fault, real checkpoints, a real store."""

from __future__ import annotations

import json
import math

import pytest
import torch

import stethoscope
from stethoscope.act import MemoryChannel
from stethoscope.act.recovery import Recovery
from stethoscope.checkpoint import retention
from stethoscope.checkpoint.disk import CheckpointInfo
from stethoscope.diagnose.stored import run_findings
from stethoscope.store.db import RunStore
from stethoscope.store.query import open_run
from tests.act import recovery_loop as loop


@pytest.fixture(scope="module")
def fault_free(tmp_path_factory):
    return loop.train(tmp_path_factory.mktemp("ref"))


def _events(run_dir, kind="recovery"):
    with open_run(run_dir) as r:
        _, rows = r.query("SELECT step, severity, message, data FROM events WHERE kind = ? ORDER BY id", (kind,))
    return [(s, sev, msg, json.loads(d)) for s, sev, msg, d in rows]


def test_fault_free_twin_never_rolls_back(fault_free):
    assert fault_free["mon"].recovery.rollbacks == [] and fault_free["stopped"] is None
    assert fault_free["final"] < 0.4  # it learned (the noise floor is 0.25)


def test_divergence_is_detected_rolled_back_and_the_run_ends_near_the_fault_free_one(tmp_path, fault_free):
    mem = MemoryChannel()
    run = loop.train(tmp_path / "fault", "diverge", channel=mem)
    (rb,) = run["mon"].recovery.rollbacks
    assert loop.FAULT_AT <= rb["onset"] <= loop.FAULT_AT + 3 and rb["type"] in ("divergence", "loss_spike")
    assert rb["restored"] <= rb["onset"] - 2 and rb["restored"] % 20 == 0  # a checkpoint from before the onset
    assert rb["skip"] == [rb["restored"] + 1, rb["onset"]] and rb["lr_scale"] == 0.5
    assert rb["outcome"].startswith("recovered after rollback 1")
    ref = fault_free["final"]
    assert abs(run["final"] - ref) / ref <= 0.05, (run["final"], ref)
    unguarded = loop.train(tmp_path / "unguarded", "diverge", recovery=False)
    assert not math.isfinite(unguarded["final"]) or unguarded["final"] > 3 * ref  # the fault is real

    # announced: the incident, then the rollback, then its outcome, on the same key
    mine = [a for a in mem.sent if a.type == "rollback"]
    assert [a.kind for a in mine] == ["trigger", "resolve"] and len({a.key for a in mine}) == 1
    assert "restored the checkpoint of step" in mine[0].message and "recovered" in mine[1].message
    paged = [a for a in mem.sent if a.type in ("divergence", "loss_spike", "lr_schedule")  # lr: the jump behind it
             and a.step >= loop.FAULT_AT]
    assert paged and paged[0].kind == "trigger"
    assert any("rolled back to step" in a.note for a in paged if a.kind == "resolve")  # closed, saying why

    # the store: the abandoned steps are kept aside, the curve is the path that continued
    run_dir = tmp_path / "fault" / "run"
    with open_run(run_dir) as r:
        assert r.superseded() == [(rb["restored"] + 1, rb["abandoned_to"], 1, r.superseded()[0][3])]
        steps, losses = r.series("train/loss")
        assert len(steps) == len(set(steps)) and max(losses) < 3.0  # no point of the blown-up path
        assert not set(range(rb["skip"][0], rb["skip"][1] + 1)) & set(steps)  # skipped batches: no step
        _, old = r.query("SELECT MAX(p.value) FROM points_superseded p JOIN series s ON s.id = p.series_id "
                         "WHERE s.name = 'train/loss'")
        assert old[0][0] > 3.0  # ... which is kept, not deleted
        abandoned = [f for f in run_findings(r) if f.evidence.get("rolled_back") == 1]
        assert abandoned and all("rolled back to step" in f.message for f in abandoned)
    actions = [d["action"] for _, _, _, d in _events(run_dir)]
    assert actions == ["rollback", "recovered"]
    assert [d["step"] for *_, d in _events(run_dir, "rollback")] == [rb["restored"]]  # the checkpoint's own event


def test_nonfinite_loss_rolls_back(tmp_path, fault_free):
    run = loop.train(tmp_path, "nan")
    (rb,) = run["mon"].recovery.rollbacks
    assert rb["type"] == "nan" and rb["onset"] == loop.FAULT_AT and rb["restored"] == loop.FAULT_AT - 20
    assert math.isfinite(run["final"]) and abs(run["final"] - fault_free["final"]) / fault_free["final"] <= 0.05
    # a crash after it: the resumed run knows the rollback (its skips, its LR scale, the count toward max_rollbacks)
    model, opt = loop.make()
    ck = stethoscope.Checkpoints(tmp_path / "ck", on_signal=None)
    with stethoscope.Monitor(tmp_path / "run", model, opt, checkpoints=ck, recovery=Recovery(), resume=True) as mon:
        assert mon.resume() == 481 and len(mon.recovery.rollbacks) == 1  # the last checkpoint: step 480
        assert mon.should_skip(loop.FAULT_AT) and mon.recovery.lr_scale == 0.5


def test_gives_up_after_max_rollbacks_stops_the_run_with_a_final_alert(tmp_path):
    mem = MemoryChannel()
    run = loop.train(tmp_path, "nan_always", channel=mem,
                     recovery=Recovery(patience=15, skip_batches=False, max_rollbacks=2))
    policy = run["mon"].recovery
    # stopped in the pass the NaN came back in: at the step the writer thread decides (a checkpoint due at the
    # NaN step used to flush it at once; the NaN weights are no longer saved, user-trial-3). How many steps after
    # the NaN that is depends on how busy the machine keeps the writer thread (29 under a loaded test run), so
    # the test asks only that the run stopped in that pass, before its 500 steps ran out.
    assert len(policy.rollbacks) == 2 and loop.FAULT_AT <= run["stopped"] < 500
    assert "max_rollbacks 2" in policy.gave_up
    final = [a for a in mem.sent if a.type == "rollback"][-1]
    assert final.kind == "stop" and final.severity == "critical" and "gave up" in final.message
    assert final.title().startswith("[RUN STOPPED] rollback at step 120")
    assert [d["action"] for *_, d in _events(tmp_path / "run")] == ["rollback", "rollback", "gave_up"]


def test_a_fault_back_after_a_restore_uses_the_remaining_rollbacks(tmp_path):
    """The fault outlasts the first restore (checkpoint 90): the divergence the detectors then date before the
    restore (their window came back with the checkpoint) is dated in the steps trained since, and the run is
    rolled back again instead of stopped with rollbacks unused (issue 27: stopped at loss 20.5, 2 of 3 unused)."""
    run = loop.train(tmp_path, "diverge_persist", every=30)
    policy = run["mon"].recovery
    assert policy.gave_up is None and run["stopped"] is None
    first, *again = policy.rollbacks
    assert first["restored"] == 90 and again
    for before, rb in zip(policy.rollbacks, again):
        assert rb["onset"] > before["restored"]  # searched only in the steps trained since the restore
        assert rb["restored"] <= before["restored"]  # never forward: the same checkpoint or an older one
    assert policy.lr_scale == 0.5 ** len(policy.rollbacks)
    assert run["final"] < 1.0  # learned on (broken: stopped with the held-out loss near 10)


def test_recovery_needs_checkpoints_and_valid_settings(tmp_path):
    with pytest.raises(ValueError, match="checkpoints=stethoscope.Checkpoints"):
        stethoscope.Monitor(tmp_path / "a", recovery=Recovery())
    with pytest.raises(ValueError, match="live detectors"):
        stethoscope.Monitor(tmp_path / "b", detect=False, recovery=Recovery(),
                            checkpoints=stethoscope.Checkpoints(tmp_path / "ck", on_signal=None))
    for bad in ({"patience": -1}, {"lr_factor": 2.0}, {"max_rollbacks": -1}, {"on": ("plateau",)},
                {"skip_batches": -3}, {"lookback": 0}):
        with pytest.raises(ValueError, match="Recovery."):
            Recovery(**bad)
    assert not (tmp_path / "a").exists()  # refused before anything was written


def test_retention_keeps_the_checkpoint_a_rollback_needs():
    infos = [CheckpointInfo(s, None, "ok") for s in (10, 20, 30, 40, 50)]  # type: ignore[arg-type]
    assert [i.step for i in retention.to_delete(infos, 2, None, "min")] == [10, 20, 30]
    assert [i.step for i in retention.to_delete(infos, 2, None, "min", hold=33)] == [10, 20]
    assert [i.step for i in retention.to_delete(infos, 2, None, "min", hold=[33, 12])] == [20]  # an incident's and the lookback's


def test_a_late_finding_still_finds_the_checkpoint_from_before_its_onset(tmp_path):
    """Saving every 5 steps and keeping 2, a finding 30 steps late still has a checkpoint before its onset:
    retention keeps the newest one at or before each of the last two multiples of `lookback`."""
    model = torch.nn.Linear(2, 2)
    ck = stethoscope.Checkpoints(tmp_path / "ck", every=5, keep_last=2, extra={"model": model}, on_signal=None,
                                 strict=True)
    with stethoscope.Monitor(tmp_path / "run", model, checkpoints=ck, recovery=Recovery(lookback=40)) as mon:
        assert ck.lookback == 40
        for step in range(1, 101):
            mon.step(step, loss=1.0)
        steps = [i.step for i in ck.list()]
    assert steps == [40, 80, 95, 100]
    assert ck.load_latest(before=100 - 30)["step"] == 40


def test_supersede_moves_points_aside_and_new_points_take_their_place(tmp_path):
    store = RunStore(tmp_path / "rank-00000.sqlite")
    store.write_points([("train/loss", s, float(s), 1.0) for s in range(10)])
    store.write_events([(5, 1.0, "loss_spike", "warning", "spike", "x", None)])
    store.supersede(6, 9, 1)
    store.write_points([("train/loss", s, -float(s), 2.0) for s in range(6, 8)])
    store.close()
    with open_run(tmp_path) as r:
        steps, values = r.series("train/loss")
        assert steps == list(range(8)) and values[6:] == [-6.0, -7.0]
        _, old = r.query("SELECT step, value FROM points_superseded ORDER BY step")
        assert old == [(s, float(s)) for s in range(6, 10)]
        assert r.superseded() == [(6, 9, 1, 1)]


def test_a_store_without_the_superseded_table_still_reads(tmp_path):
    import sqlite3

    store = RunStore(tmp_path / "rank-00000.sqlite")
    store.write_points([("train/loss", 1, 1.0, 1.0)])
    store.close()
    with sqlite3.connect(tmp_path / "rank-00000.sqlite") as conn:
        conn.execute("DROP TABLE superseded")
    with open_run(tmp_path) as r:
        assert r.superseded() == [] and r.series("train/loss") == ([1], [1.0])


def test_should_skip_is_false_without_recovery(tmp_path):
    with stethoscope.Monitor(tmp_path, torch.nn.Linear(2, 1)) as mon:
        assert mon.should_skip(3) is False and mon.recovery is None
