"""A series the log prints as a running mean (mmengine's LogProcessor: every loss is the mean of its last
`window_size` values): the importer declares it, and the overfitting and frozen-weights checks judge the evals
recovered from the means (`detect.running_mean`), on the committed logs of a real mmengine run."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

from stethoscope.detect.config import DetectConfig
from stethoscope.detect.overfit import OverfitDetector
from stethoscope.detect.running_mean import RunningMeanUndo
from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers import read_any
from stethoscope.importers.running_means import META_KEY
from stethoscope.records import EVAL_LOSS, LOSS, StepRecord

ROOT = Path(__file__).resolve().parents[1] / "assets" / "real_trainers"
CASES = {c["case"]: c for c in json.loads((ROOT / "labels.json").read_text())}


def _means(values: list[float], window: int, places: int | None = None) -> list[float]:
    out = [sum(values[max(0, i + 1 - window): i + 1]) / len(values[max(0, i + 1 - window): i + 1])
           for i in range(len(values))]
    return out if places is None else [round(m, places) for m in out]


@pytest.mark.parametrize("places", [None, 4])
def test_the_values_behind_a_running_mean_come_back_within_their_error_bound(places: int | None) -> None:
    rng = random.Random(3)
    values = [1.4 - 0.02 * i + rng.uniform(-0.05, 0.05) for i in range(30)]
    undo = RunningMeanUndo(10)
    got = [undo.push(m) for m in _means(values, 10, places)]
    for (v, err), truth in zip(got, values):
        assert abs(v - truth) <= max(err, 1e-12), (v, truth, err)
    assert (got[-1][1] == 0.0) == (places is None)  # an exact float has no error; a 4-decimal print has one
    assert all(err < 0.01 for _, err in got)


def test_a_mean_that_is_not_of_this_window_passes_through_instead_of_inventing_values() -> None:
    undo = RunningMeanUndo(10)
    assert undo.push(0.9) == (0.9, 0.05)
    value, _ = undo.push(0.2)  # 2 x 0.2 - 0.9 < 0: no mean of 2 positive losses
    assert value == 0.2 and undo.broken
    assert undo.push(0.3)[0] == 0.3


@pytest.mark.parametrize("source", ["file", "console"])
def test_a_frozen_mmengine_run_is_found_at_the_stop_on_the_evals_behind_its_printed_means(source: str) -> None:
    # mmengine prints val/loss as the mean of the last 10 evals: 1.0851, 1.0458, 1.0221 ... never repeating
    # while the evals behind it repeat 0.9275 from step 160 (the weights froze at 89)
    case = CASES[f"mmengine_runner-frozen-s0-{source}"]
    (run,) = read_any(ROOT / case["file"])
    assert run.meta[META_KEY][EVAL_LOSS] == 10 and run.meta[META_KEY][LOSS] == 10
    (label,) = [lb["step"] for lb in case["labels"] if lb["type"] == "plateau"]
    stops = [f for f in diagnose_run(run).findings if f.type == "frozen_loss"]
    assert len(stops) == 1 and abs(stops[0].step - label) <= 2 * 4, (stops, label)
    assert "running mean" in stops[0].message
    # the scalars file holds full floats: a sure repeat; the console's 4 decimals leave ~3 digits: possible
    assert stops[0].severity == ("warning" if source == "file" else "info")
    if source == "console":  # a recovered value is shown to the digits it is known to, not as a float's repr
        assert "the eval loss is 0.927 (to +-0.0007)" in stops[0].message


@pytest.mark.parametrize("source", ["file", "console"])
def test_a_healthy_mmengine_run_read_through_its_means_has_no_frozen_weights_or_overfitting(source: str) -> None:
    case = CASES[f"mmengine_runner-healthy-s0-{source}"]
    (run,) = read_any(ROOT / case["file"])
    assert run.meta[META_KEY][EVAL_LOSS] == 10
    found = [f for f in diagnose_run(run).findings if f.severity in ("warning", "error", "critical")]
    assert not found, found


def test_overfitting_hidden_by_the_running_mean_is_found_at_the_best_eval_behind_it() -> None:
    # evals fall to their best at eval 12 and then rise 1% an eval: the mean over 10 bottoms out 5 evals later
    evals = [1.0 - 0.03 * i for i in range(13)] + [0.64 * (1 + 0.01 * i) for i in range(1, 9)]
    best = 10 * evals.index(min(evals))
    means = _means(evals, 10)

    def run(window: int) -> list:
        det, out = OverfitDetector(DetectConfig(eval_loss_window=window)), []
        for i, m in enumerate(means):
            out += det.update(StepRecord(step=10 * i, values={LOSS: 1.0 - 0.04 * i, EVAL_LOSS: m}))
        return [f for f in out + det.finish() if f.type == "overfitting" and f.severity == "warning"]

    assert {f.step for f in run(10)} == {best}
    assert best not in {f.step for f in run(1)}  # judged on the printed means it is dated late


def _write(path: Path, text: str) -> Path:
    with gzip.open(path, "wt") as fh:
        fh.write(text)
    return path


def test_the_window_is_read_from_the_config_dump_and_only_mmengine_logs_are_declared(tmp_path: Path) -> None:
    lines = "".join(f"11/27 07:04:06 - mmengine - INFO - Iter(train) [{4 * i:3d}/256]  lr: 1.0000e-03  "
                    f"time: 0.0034  data_time: 0.0025  loss: {1.4 - 0.01 * i:.4f}\n" for i in range(1, 30))
    dump = "11/27 07:04:06 - mmengine - INFO - Config:\nlog_processor = dict(\n    by_epoch=False, window_size=50)\n"
    (run,) = read_any(_write(tmp_path / "a.log.gz", dump + lines))
    assert run.meta[META_KEY][EVAL_LOSS] == 50
    (run,) = read_any(_write(tmp_path / "b.log.gz", lines))
    assert run.meta[META_KEY][LOSS] == 10  # mmengine's default
    (run,) = read_any(_write(tmp_path / "c.log.gz", dump.replace("50", "'global'") + lines))
    assert META_KEY not in run.meta  # not a count of values: nothing to undo
    (run,) = read_any(_write(tmp_path / "d.log.gz", lines.replace(" - mmengine - ", " - mylogger - ")))
    assert META_KEY not in run.meta


def test_a_window_set_by_the_user_wins_over_the_declared_one_and_1_turns_the_recovery_off() -> None:
    case = CASES["mmengine_runner-frozen-s0-file"]
    (run,) = read_any(ROOT / case["file"])
    off = diagnose_run(run, DetectConfig.from_mapping({"eval_loss_window": 1}))
    assert not [f for f in off.findings if f.type == "frozen_loss"]  # the printed means never repeat
    with pytest.raises(ValueError, match="eval_loss_window"):
        DetectConfig(eval_loss_window=0)
