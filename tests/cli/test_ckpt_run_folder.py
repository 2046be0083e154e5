"""`ckpt prune RUN` prunes the run's checkpoint folder, as `ckpt list RUN` and `ckpt verify RUN` read it
(user-trial: on the demo's --recover run, prune of the run folder said '0 to delete, 0 kept' while prune of its
checkpoints/ folder would delete 2); the help's examples name the run folder the demo writes."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from stethoscope.cli.main import cli

torch = pytest.importorskip("torch")


def _ckpt(*args: str):
    return CliRunner().invoke(cli, ["ckpt", *args])


def test_prune_of_a_run_folder_prunes_its_checkpoints(tmp_path):
    import stethoscope

    ck = stethoscope.Checkpoints(tmp_path / "checkpoints", keep_last=None, extra={"model": torch.nn.Linear(3, 2)},
                                 on_signal=None, strict=True)
    for s in (10, 20, 30, 40):
        ck.save(s, wait=True)
    ck.close()
    of_folder = _ckpt("prune", str(tmp_path / "checkpoints"), "--keep-last", "2", "--dry-run")
    of_run = _ckpt("prune", str(tmp_path), "--keep-last", "2", "--dry-run")
    assert of_run.exit_code == of_folder.exit_code == 0, of_run.output
    assert "2 to delete, 2 kept" in of_folder.output and of_run.output == of_folder.output
    assert _ckpt("prune", str(tmp_path), "--keep-last", "2").exit_code == 0
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("step-*")) == ["step-00000030", "step-00000040"]


def test_the_ckpt_examples_name_no_folder_the_demo_never_writes():
    res = CliRunner().invoke(cli, ["ckpt", "prune", "--help"])
    assert "runs/demo/ckpt" not in res.output and "stethoscope ckpt prune runs/demo " in res.output


def test_prune_counts_the_checkpoints_a_rollback_set_aside(tmp_path):
    """user-trial: `ckpt list` showed 7 checkpoints (5 + 2 superseded) where prune said "2 to delete, 2 kept": the
    superseded ones were left out of the count without a word. Prune keeps them and says so."""
    import stethoscope

    ck = stethoscope.Checkpoints(tmp_path / "checkpoints", keep_last=None, extra={"model": torch.nn.Linear(3, 2)},
                                 on_signal=None, strict=True)
    for s in (10, 20, 30, 40, 50):
        ck.save(s, wait=True)
    ck.rollback(30)  # sets 40 and 50 aside
    ck.close()
    listed = _ckpt("list", str(tmp_path))
    assert listed.output.count("superseded") >= 2, listed.output
    res = _ckpt("prune", str(tmp_path), "--keep-last", "2", "--dry-run")
    assert res.exit_code == 0, res.output
    assert "1 to delete, 2 kept, and 2 set aside by a rollback" in res.output
    assert _ckpt("prune", str(tmp_path), "--keep-last", "2").exit_code == 0
    assert len(list((tmp_path / "checkpoints").glob("superseded-step-*"))) == 2  # never deleted by retention
