"""What a new user reads (user-trial): a run whose newest loss is NaN says `nan` in `show` and `runs`, as `watch`
and `compare` do (it said `-`, the mark for no loss at all; the JSON keeps null); one logged step is "1 step
logged", not "1 steps"."""

from __future__ import annotations

import json
import re

from click.testing import CliRunner

from stethoscope import Monitor
from stethoscope.cli.main import cli


def _invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def _nan_run(path):
    with Monitor(path, strict=True) as mon:
        for step in range(12):
            mon.step(step, loss=float("nan") if step >= 8 else 3.0 - step / 10)
    return path


def test_show_and_runs_print_a_nan_last_loss_as_nan(tmp_path):
    run = _nan_run(tmp_path / "runs" / "nan")
    shown = _invoke("show", str(run))
    assert shown.exit_code == 0, shown.output
    assert re.search(r"last loss\s*│\s*nan", shown.stdout)
    assert json.loads(_invoke("show", str(run), "--json").stdout)["last_loss"] is None
    listed = _invoke("runs", str(tmp_path / "runs"))
    assert listed.exit_code == 0 and re.search(r"│\s*nan\s*│", listed.stdout)
    assert json.loads(_invoke("runs", str(tmp_path / "runs"), "--json").stdout)[0]["last_loss"] is None


def test_a_run_without_loss_still_shows_a_dash(tmp_path):
    with Monitor(tmp_path / "run", strict=True) as mon:
        for step in range(3):
            mon.step(step, grad_norm=1.0)
    shown = _invoke("show", str(tmp_path / "run"))
    assert shown.exit_code == 0, shown.output
    assert re.search(r"last loss\s*│\s*-", shown.stdout)


def test_one_logged_step_is_one_step(tmp_path):
    log = tmp_path / "one.jsonl"
    log.write_text('{"step": 5, "loss": 2.5}\n')
    res = _invoke("diagnose", str(log))
    assert res.exit_code == 0, res.output
    assert "1 step logged" in res.stdout and "1 step: too few to judge" in res.stdout
    assert "1 steps logged" not in res.stdout


def test_a_note_on_the_verdict_is_printed_with_it_not_folded_as_one_more_healthy(tmp_path):
    """HF's train loss summed over 16 accumulation steps: the note that says so is a `healthy` finding beside the
    verdict; folded into '+ info: 1 healthy' the reader saw 'healthy: loss 9.4' with no word on the factor."""
    rows = []
    for s in range(10, 610, 10):
        rows.append({"epoch": s / 600, "grad_norm": 3.0, "learning_rate": 2e-5, "step": s,
                     "loss": round(16 * (0.6 - 0.2 * s / 600) + 0.01 * (s % 3), 4)})
        if s % 100 == 0:
            rows.append({"epoch": s / 600, "eval_loss": round(0.6 - 0.2 * s / 600, 4), "step": s})
    state = tmp_path / "trainer_state.json"
    state.write_text(json.dumps({"global_step": 600, "log_history": rows}))
    res = _invoke("diagnose", str(state))
    assert res.exit_code == 0, res.output
    assert "gradient-accumulation" in res.stdout and "1 healthy" not in res.stdout


def test_folded_findings_recovered_in_one_step_say_one_step():
    from stethoscope.cli.findings_view import hidden_summary
    from stethoscope.records import Finding

    spikes = [Finding("loss_spike", "info", s, "spike", end_step=s + 1, evidence={"recovered": True}) for s in (5, 9)]
    assert "(all recovered within 1 step)" in hidden_summary(spikes)


def test_a_run_that_never_learned_is_not_told_its_loss_was_still_falling(tmp_path):
    """The underfitting verdict (the loss never came down) listed 'the run is too short: the loss was still
    falling at the end' as its first cause (two real flat LoRA/SLM logs); the curve's own underfitting (still
    falling) keeps it."""
    rows = [{"epoch": s / 500, "grad_norm": 0.5, "learning_rate": 2e-5, "step": s,
             "loss": round(1.4 + 0.01 * ((s * 7919) % 11 - 5) / 5, 4)} for s in range(5, 505, 5)]
    state = tmp_path / "trainer_state.json"
    state.write_text(json.dumps({"global_step": 500, "log_history": rows}))
    res = _invoke("diagnose", str(state), "--json")
    assert res.exit_code == 0, res.output
    (verdict,) = [f for f in json.loads(res.stdout)["findings"] if f["type"] == "underfitting"]
    assert "never came down" in verdict["message"] and verdict["causes"]
    assert not [c for c in verdict["causes"] if "still falling" in c]
    falling = "".join(f"step {s} | loss {3.0 * 0.999 ** s:.4f}\n" for s in range(10, 2010, 10))
    (tmp_path / "falling.log").write_text(falling)
    found = json.loads(_invoke("diagnose", str(tmp_path / "falling.log"), "--json").stdout)["findings"]
    assert any("still falling" in c for f in found if f["type"] == "underfitting" for c in f["causes"])


def test_the_run_word_of_a_short_log_names_its_worst_finding_not_too_short(tmp_path):
    """11 of the 32 real logs printed `run: too_short` above a CRITICAL hang, an ERROR divergence or a frozen
    loss; a log too short to judge with nothing at warning stays `too_short`."""
    log = tmp_path / "train.log"
    log.write_text("iter 1: loss 11.0666, time: 13381.00ms\niter 400: loss 11.0666, time: 19090.34ms\n")
    res = _invoke("diagnose", str(log), "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    worst = out["findings"][0]
    assert worst["severity"] in ("warning", "error", "critical")
    assert out["label"] == f"{worst['type']} (curve: too short to classify)"
    assert f"run: {worst['type']} (curve: too short to classify)" in _invoke("diagnose", str(log)).stdout
    quiet = tmp_path / "two.jsonl"
    quiet.write_text('{"step": 1, "loss": 2.5}\n{"step": 2, "loss": 2.4}\n')
    assert json.loads(_invoke("diagnose", str(quiet), "--json").stdout)["label"] == "too_short"


def test_diagnose_of_stdin_says_it_reads_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["diagnose", "-"], input="step 1 | loss 2.5\n")
    assert res.exit_code == 2
    assert "reads files, not stdin" in res.stderr and "stethoscope explain -" in res.stderr


def test_a_binary_file_is_said_to_be_binary_not_of_no_known_format(tmp_path):
    blob = tmp_path / "model.bin"
    blob.write_bytes(bytes(range(256)) * 16)
    for verb in (["diagnose"], ["report", "-o", str(tmp_path / "r.html")]):
        res = _invoke(*verb[:1], str(blob), *verb[1:])
        assert res.exit_code == 2
        assert f"{blob}: binary data, not a text log" in res.stderr and "tried:" not in res.stderr
    text = tmp_path / "notes.txt"
    text.write_text("WARNING: something is deprecated\n" * 3)
    assert "no known log format" in _invoke("diagnose", str(text)).stderr  # a text file keeps the formats tried


def test_the_schema_says_the_findings_table_holds_the_raw_rows(tmp_path):
    """`query RUN "SELECT COUNT(*) FROM findings"` gave 11 on the demo's NaN run where diagnose and show list 5."""
    with Monitor(tmp_path / "run", strict=True) as mon:
        mon.step(0, loss=1.0)
    res = _invoke("query", str(tmp_path / "run"), "--schema", "--csv")
    assert res.exit_code == 0, res.output
    (line,) = [ln for ln in res.stdout.splitlines() if ln.startswith("findings,id,")]
    assert "merge them into incidents" in line
