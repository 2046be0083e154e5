"""Messages that count say what the data says: one record at one step, no evals, a scale that was already low,
a jump at the log's last record (no "between steps 200 and 200", "only 0 eval loss(es)", "collapsed to X (from X",
"0 steps later", "1 steps before")."""

from __future__ import annotations

import random
from pathlib import Path

from stethoscope.detect.spike_findings import divergence
from stethoscope.diagnose.engine import diagnose_run
from stethoscope.findings.catalogue import EVAL_SPARSE, LOSS_SCALE_COLLAPSE, NAN
from stethoscope.importers import read_any


def _messages(tmp_path: Path, lines: list[str]) -> dict[str, str]:
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    (run,) = read_any(path)
    return {f.type: f.message for f in diagnose_run(run).findings}


def test_one_nan_and_a_scale_that_was_low_from_the_start(tmp_path: Path) -> None:
    rng = random.Random(0)
    lines = [f"step {s} | loss {'nan' if s == 200 else f'{3.0 * 0.999 ** s + rng.gauss(0, 0.01):.4f}'} "
             f"| loss_scale 0.0002441" for s in range(400)]
    msgs = _messages(tmp_path, lines)
    assert "1 non-finite record at step 200, then finite again" in msgs[NAN]
    assert "between steps 200 and 200" not in msgs[NAN]
    assert "stayed at 0.0002441 from step 0" in msgs[LOSS_SCALE_COLLAPSE]
    assert "(from 0.0002441" not in msgs[LOSS_SCALE_COLLAPSE]


def test_a_log_with_no_eval_says_so(tmp_path: Path) -> None:
    rng = random.Random(0)
    msgs = _messages(tmp_path, [f"step {s} | loss {3.0 * 0.999 ** s + rng.gauss(0, 0.01):.4f}" for s in range(2000)])
    assert msgs[EVAL_SPARSE].startswith("no eval loss in 1999 steps")


def test_a_jump_at_the_last_record_and_one_step_later() -> None:
    inc = {"level": 2.0, "first": 9.0, "peak": 9.0, "peak_step": 5, "last": 9.0, "last_step": 5, "start": 5,
           "respikes": 0, "causes": []}
    assert "had not come back by the last record (loss 9 at step 5)" in divergence(inc, 5, "spike").message
    assert "had not come back 1 step later" in divergence(inc, 6, "spike").message
