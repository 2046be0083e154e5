"""Every committed log of the tiny-GPT runs (tests/assets/gpt_runs, made by bench/gpt_runs/make_logs.py) is
read: its steps, its train loss and its eval losses, as the logger wrote them.

`logged.json.gz` holds what each logger showed (step, value) when it wrote the log; the tests need nothing
but the committed files (no torch; the TensorBoard logs need the `tensorboard` extra, as any event file does)."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest

from stethoscope.importers import read_any
from stethoscope.records import EVAL_LOSS, LOSS
from tests.importers.series import series

ROOT = Path(__file__).resolve().parents[1] / "assets" / "gpt_runs"
CASES = json.loads((ROOT / "labels.json").read_text())
LOGGED = json.loads(gzip.decompress((ROOT / "logged.json.gz").read_bytes()))


def test_the_set_has_five_formats_eight_faults_and_both_splits() -> None:
    assert {c["format"] for c in CASES} == {"nanogpt", "hf", "wandb", "lightning", "tensorboard"}
    assert len({c["fault"] for c in CASES}) == 8
    assert {c["split"] for c in CASES} == {"dev", "heldout", "heldout2", "heldout3", "heldout4", "heldout5", "heldout6", "heldout7", "heldout8", "heldout9"}
    assert all(c["case"] in LOGGED for c in CASES)


# Known misreadings, each a bug to fix (strict: the test says when the fix lands)
KNOWN: dict[str, str] = {}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.xfail(reason=KNOWN[c["case"]], strict=True))
                                  if c["case"] in KNOWN else c for c in CASES], ids=[c["case"] for c in CASES])
def test_steps_and_losses_are_read(case: dict) -> None:
    if case["format"] == "tensorboard":
        pytest.importorskip("tensorboard")  # the `tensorboard` extra reads event files
    (run,) = read_any(ROOT / case["file"])
    logged = LOGGED[case["case"]]
    loss = series(run, LOSS)
    want = [(k, v) for k, v in logged["loss"] if math.isfinite(v)]
    assert want
    missing = [k for k, _ in want if k not in loss]
    assert not missing, f"steps not read: {missing[:10]}"
    wrong = [(k, v, loss[k]) for k, v in want if not math.isclose(loss[k], v, rel_tol=1e-4, abs_tol=1e-4)]
    assert not wrong, f"(step, logged, read): {wrong[:5]}"
    assert max(loss) == max(k for k, _ in logged["loss"])  # no step past the last one logged
    bad = [k for k, v in logged["loss"] if not math.isfinite(v)]
    assert [k for k in bad if math.isfinite(loss.get(k, 0.0))] == [], "a NaN the log shows is read as a number"
    evals = series(run, EVAL_LOSS)
    want_eval = [(k, v) for k, v in logged["eval"] if math.isfinite(v)]
    assert sorted(evals) == sorted(k for k, _ in logged["eval"])
    assert all(math.isclose(evals[k], v, rel_tol=1e-4, abs_tol=1e-4) for k, v in want_eval)
