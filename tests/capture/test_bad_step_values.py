"""Values the loop gets wrong are refused at `mon.step`, with a message naming them, and cost nothing else
(user-trial-3): a per-sample loss vector (`reduction="none"`) passed as `loss=` made the flush's one transfer
fail, so `close()` failed, the run stayed `running` with no end, and the other values of that flush were lost;
a step given as a string or None failed the writer and the detectors far from the call, with tracebacks.
Real torch, real store."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import stethoscope
from stethoscope import Monitor
from stethoscope.store.query import open_run

torch.set_num_threads(1)


def _losses(run):
    with open_run(str(run)) as r:
        return r.query("SELECT step, value FROM metrics WHERE name = 'train/loss' ORDER BY step")[1]


def test_a_loss_vector_is_refused_and_the_run_closes(tmp_path, caplog):
    model = torch.nn.Linear(4, 1)
    run = tmp_path / "run"
    mon = Monitor(str(run), model=model, serve=False)
    for step in range(6):
        x = torch.randn(8, 4, generator=torch.Generator().manual_seed(step))
        per_sample = ((model(x) - 1.0) ** 2).squeeze(1)
        mon.step(step, loss=per_sample if step == 3 else per_sample.mean())
    mon.eval(5, eval_loss=torch.ones(2))
    mon.close()
    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "completed" and info["last_step"] == 5 and info["internal_errors"] == 2
    assert [s for s, _ in _losses(run)] == [0, 1, 2, 4, 5]
    assert "must be one number, got a tensor of shape (8,)" in caplog.text and "loss.mean()" in caplog.text


def test_a_step_that_is_no_integer_is_refused_by_name(tmp_path, caplog):
    run = tmp_path / "run"
    with Monitor(str(run), serve=False) as mon:
        for step in (0, "a", None, 1.5, np.int64(2), torch.tensor(3)):
            mon.step(step, loss=1.0)
    assert [s for s, _ in _losses(run)] == [0, 2, 3]
    assert "mon.step's step must be an int, got str 'a'" in caplog.text
    assert "TypeError: '<' not supported" not in caplog.text and "NOT NULL constraint" not in caplog.text


def test_a_step_past_64_bits_is_refused_by_name_and_the_others_kept(tmp_path, caplog):
    run = tmp_path / "run"
    with Monitor(str(run), serve=False) as mon:
        for step in (0, 2**70, 1, -(2**63) - 1, 2):
            mon.step(step, loss=1.0)
    assert [s for s, _ in _losses(run)] == [0, 1, 2]
    assert f"must fit in a signed 64-bit integer (the store's), got {2**70}" in caplog.text
    assert "OverflowError" not in caplog.text


def test_checkpoint_intervals_of_the_wrong_type_are_named(tmp_path):
    with pytest.raises(ValueError, match=r"every must be an int >= 1 or None, got '5'"):
        stethoscope.Checkpoints(tmp_path / "c", every="5")


def test_a_model_or_optimizer_of_the_wrong_kind_is_named_at_creation(tmp_path):
    with pytest.raises(TypeError, match=r"Monitor\(model=\.\.\.\) expects a torch nn.Module .*got str"):
        Monitor(str(tmp_path / "a"), model="gpt2", serve=False)
    with pytest.raises(TypeError, match=r"Monitor\(optimizer=\.\.\.\) expects a torch optimizer .*got Linear"):
        Monitor(str(tmp_path / "b"), model=torch.nn.Linear(2, 2), optimizer=torch.nn.Linear(2, 2), serve=False)
    assert not (tmp_path / "a").exists()  # nothing started, nothing written


def test_a_run_path_that_is_a_file_is_refused_by_name(tmp_path):
    from stethoscope.errors import UsageError

    (tmp_path / "afile").write_text("not a run")
    for path in (tmp_path / "afile", tmp_path / "afile" / "run"):
        with pytest.raises(UsageError, match=r"afile is a file, not a folder; give the run a directory path"):
            Monitor(str(path), serve=False)
