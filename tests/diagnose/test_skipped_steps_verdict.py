"""The verdict of a run whose every optimizer step was skipped names the skipped steps, not the LR
(`diagnose.verdicts.underfitting`). A DeepSpeed run whose fp16 loss scaler skipped every step read
"underfitting (not learning)" with "LR too low" as the first cause, beside a `loss_scale_collapse` warning that
named the real cause."""

from __future__ import annotations

from pathlib import Path

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.diagnose.verdicts import run_label
from stethoscope.importers import read_any

from tests.detect.test_skipped_steps import _deepspeed_log


def test_the_not_learning_verdict_cites_the_skipped_steps(tmp_path: Path) -> None:
    (run,) = read_any(_deepspeed_log(tmp_path / "ds.log", skipped_from=1))
    d = diagnose_run(run)
    (f,) = [f for f in d.findings if f.type == "underfitting"]
    assert f.severity == "warning" and "skipped" in f.message, f
    assert "skipped" in f.causes[0] and not any("LR too low" in c for c in f.causes), f.causes
    assert "skipped" in run_label(d.findings, d.classification)


def test_a_run_that_learns_and_never_skips_has_no_such_cause(tmp_path: Path) -> None:
    (run,) = read_any(_deepspeed_log(tmp_path / "ds.log", skipped_from=None))
    d = diagnose_run(run)
    assert not any("skipped" in c for f in d.findings for c in f.causes if f.type == "underfitting")
