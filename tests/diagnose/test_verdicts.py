"""Run-level verdicts: underfitting owns the plateau from the start; a clean run says healthy with numbers."""

from __future__ import annotations

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers.registry import read_any
from tests.diagnose.test_evidence_units import _megatron


def test_flat_from_the_start_is_one_underfitting_incident(tmp_path):
    (run,) = read_any(_megatron(tmp_path / "train.log", "flat"))
    d = diagnose_run(run)
    loud = [f for f in d.findings if f.severity != "info"]
    assert [f.type for f in loud] == ["underfitting"], [(f.type, f.message) for f in loud]
    (u,) = loud
    assert u.step == 1 and u.severity == "warning"
    assert u.symptoms == [{"type": "plateau", "step": 1}]
    assert u.fixes, "advice applies to the verdict"
    assert d.to_dict()["findings"][0]["symptoms"] == [{"type": "plateau", "step": 1}]


def test_a_clean_run_says_healthy_with_its_numbers(tmp_path):
    (run,) = read_any(_megatron(tmp_path / "train.log", "none"))
    d = diagnose_run(run)
    assert not [f for f in d.findings if f.severity != "info"], [(f.type, f.message) for f in d.findings]
    (h,) = [f for f in d.findings if f.type == "healthy"]
    assert h.evidence["loss_start"] > h.evidence["loss_end"] > 1.9
    assert h.evidence["grad_norm_median"] > 0.4
    assert f"{h.evidence['loss_end']:.4g}" in h.message


def test_no_healthy_verdict_next_to_a_problem(tmp_path):
    (run,) = read_any(_megatron(tmp_path / "train.log", "spike"))
    d = diagnose_run(run)
    assert "healthy" not in {f.type for f in d.findings}


def test_the_header_agrees_with_the_verdict_below_it(tmp_path):
    """A loss still falling at the end (the curve's `underfitting`) with nothing wrong: the header says
    healthy and still improving, never `underfitting` above an INFO healthy verdict."""
    import json
    import math

    from click.testing import CliRunner

    from stethoscope.cli.main import cli

    rows = [{"step": s, "loss": 2 + 3 * math.exp(-s / 400) + 0.01 * math.sin(s * 1.7), "learning_rate": 1e-4,
             "epoch": s / 100} for s in range(1, 301)]
    log = tmp_path / "trainer_state.json"
    log.write_text(json.dumps({"global_step": 300, "log_history": rows}))
    (run,) = read_any(log)
    d = diagnose_run(run)
    assert d.classification["label"] == "underfitting" and "healthy" in [f.type for f in d.findings]
    assert d.label == "healthy, still improving" and d.to_dict()["label"] == d.label
    out = CliRunner().invoke(cli, ["diagnose", str(log), "--min-severity", "info"], env={"COLUMNS": "200"}).output
    header, below = out.splitlines()[0], out
    assert "run: healthy, still improving" in header and "underfitting" not in header, header
    assert "INFO  healthy" in below
