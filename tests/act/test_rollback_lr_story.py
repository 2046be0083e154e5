"""The LR story of a run, as a person reads it (user trial items 4 and 5), on real tiny torch training with a
real store (the MLP of `tests/act/recovery_loop.py`):

* an LR jump is the incident and the loss/grad-norm jumps it caused are its symptoms (it was an `info` note
  listed after the warning it caused);
* the LR cut of stethoscope's own rollback (`Recovery(lr_factor=0.5)`) is said as the rollback's, recognised
  from the rollback's event in the store, never as "an LR override on resume?"."""

from __future__ import annotations

import torch
from click.testing import CliRunner

from stethoscope.cli.main import cli
from stethoscope.diagnose.stored import incidents_at
from tests.act import recovery_loop as loop

torch.set_num_threads(1)
JUMP_AT, STEPS = 150, 300


def _lr_jump_run(run) -> None:
    """The LR x30 for 2 steps at step 150 (a changed config): the loss and the grad norm jump, and come back."""
    loop.train_lr(run, STEPS, lambda step: 30.0 if JUMP_AT <= step < JUMP_AT + 2 else 1.0)


def test_the_lr_jump_is_the_root_and_the_jumps_it_caused_are_its_symptoms(tmp_path):
    _lr_jump_run(tmp_path / "run")
    (d,) = incidents_at(tmp_path / "run")
    first = d.findings[0]  # the worst incident, listed first
    assert first.type == "lr_schedule" and first.step == JUMP_AT and first.severity in ("warning", "error"), first
    caused = {(s["type"], s["step"]) for s in first.symptoms}
    assert ("loss_spike", JUMP_AT + 1) in caused and ("grad_spike", JUMP_AT + 1) in caused, caused
    assert not [f for f in d.findings if f.type in ("loss_spike", "grad_spike", "grad_explosion", "update_ratio")
                and f.step is not None and JUMP_AT <= f.step <= JUMP_AT + 10]  # no incidents of their own
    assert f"at step {JUMP_AT}" in first.causes[0] and "LR" in first.causes[0] and "undo" in first.fixes[0]
    assert "and the run followed: loss spiked" in first.message
    out = CliRunner().invoke(cli, ["diagnose", str(tmp_path / "run")]).output
    assert out.splitlines()[1].split()[1:5] == ["lr_schedule", "at", "step", f"{JUMP_AT}–{first.end_step}:"], out


def test_the_rollbacks_own_lr_cut_is_said_as_the_rollbacks(tmp_path):
    run = loop.train(tmp_path, "diverge")
    (rb,) = run["mon"].recovery.rollbacks
    (d,) = incidents_at(tmp_path / "run")
    after = [f for f in d.findings if f.type == "lr_schedule" and f.step is not None and f.step > rb["restored"]
             and not f.evidence.get("rolled_back")]  # the steps the rollback did not abandon
    assert after and all("override on resume" not in f.message for f in after), [f.message for f in after]
    (cut,) = [f for f in after if f.evidence.get("rollback_lr_cut") == 1]
    assert cut.step == rb["skip"][1] + 1  # the first step trained after the restore and the skipped batches
    assert cut.severity == "info" and "rollback 1" in cut.message and "lr_factor=0.5" in cut.message
    assert "automatic recovery" in cut.causes[0]
    out = CliRunner().invoke(cli, ["diagnose", str(tmp_path / "run"), "--min-severity", "info"]).output
    assert "by stethoscope's rollback 1" in out and "override on resume?" not in out.split("LR cut")[1]
