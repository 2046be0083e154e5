"""Small things the CLI says (issue 27, item 15): ranks listed as numbers, not a Python list; `import`'s
warnings on stderr as `diagnose` prints them; a log cut to a couple of steps is too few to judge, never
"no problems found"."""

from __future__ import annotations

import json

from click.testing import CliRunner

from stethoscope import Monitor
from stethoscope.cli.main import cli


def _truncated_trainer_state(path, keep_rows: int):
    rows = [{"loss": 2.5 - 0.01 * i, "learning_rate": 1e-4, "epoch": i / 100, "step": 10 * (i + 1)} for i in range(50)]
    text = json.dumps({"global_step": 500, "log_history": rows}, indent=2)
    cut = text.index('"step": %d' % (10 * (keep_rows + 1)))  # inside the row after the last one kept
    path.write_text(text[:cut])
    return path


def test_an_unknown_rank_lists_the_ranks_as_numbers(tmp_path):
    with Monitor(tmp_path / "run", strict=True) as mon:
        for step in range(3):
            mon.step(step, loss=1.0 / (step + 1))
    res = CliRunner().invoke(cli, ["diagnose", str(tmp_path / "run"), "--rank", "5"])
    assert res.exit_code == 2 and "no rank 5 (ranks: 0)" in res.stderr and "[0]" not in res.stderr


def test_import_warns_on_stderr_like_diagnose(tmp_path):
    log = _truncated_trainer_state(tmp_path / "trainer_state.json", 6)
    res = CliRunner().invoke(cli, ["import", str(log), "--into", str(tmp_path / "run")])
    assert res.exit_code == 0 and "6 logged steps" in res.stdout
    assert "truncated or damaged JSON" in res.stderr and "truncated" not in res.stdout
    diag = CliRunner().invoke(cli, ["diagnose", str(log)])
    assert "truncated or damaged JSON" in diag.stderr and "truncated" not in diag.stdout


def test_two_steps_are_too_few_to_judge_not_no_problems(tmp_path):
    log = _truncated_trainer_state(tmp_path / "trainer_state.json", 2)
    res = CliRunner().invoke(cli, ["diagnose", str(log)])
    assert res.exit_code == 0 and "2 steps: too few to judge" in res.stdout
    assert "no problems found" not in res.stdout


def test_a_state_file_with_every_row_refused_is_bad_input_not_a_crash_log(tmp_path):
    """A trainer_state.json whose only row has step "x" and a NaN loss used to be explained as a crash log
    (the NaN text matched a failure signature): exit 0, a CRITICAL nan. It is malformed input: exit 2 naming
    the row and what was expected."""
    state = tmp_path / "trainer_state.json"
    state.write_text('{"log_history": [{"step": "x", "loss": NaN}], "global_step": 1}')
    res = CliRunner().invoke(cli, ["diagnose", str(state)])
    assert res.exit_code == 2, res.output
    assert "log_history[0]" in res.output and "integer `step`" in res.output
    assert "crash log" not in res.output and "CRITICAL" not in res.output


def test_import_refuses_a_log_with_no_training_step_as_diagnose_does(tmp_path):
    """`import` wrote an empty store and exited 0 for a log `diagnose` refuses (exit 2, the closest shape)."""
    log = tmp_path / "train.log"
    log.write_text("".join(f"Train {e}, loss: {2.7 - e / 100:.6f}, train acc: 0.45\n" for e in range(3)))
    diagnosed = CliRunner().invoke(cli, ["diagnose", str(log)])
    res = CliRunner().invoke(cli, ["import", str(log), "--into", str(tmp_path / "run")])
    if diagnosed.exit_code == 2:  # a shape the reader learns to read some day makes both read it
        assert res.exit_code == 2 and "read 0 training steps" in res.output
        assert not (tmp_path / "run").exists()
    else:
        assert res.exit_code == 0
    empty = tmp_path / "empty.log"
    empty.write_text("starting\nloading data\ndone\n")
    res = CliRunner().invoke(cli, ["import", str(empty), "--into", str(tmp_path / "run2")])
    assert res.exit_code == 2 and not (tmp_path / "run2").exists()
