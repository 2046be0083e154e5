"""A step time printed under any common name is read as `perf/step_time_s`, in seconds: the name's unit
when it gives one, else its level's (30 and more: ms), the rule the live throughput detector applies
(`detect.step_time_alias.judge_times`). A clock, a date, a data wait or an eval's runtime is never one."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from stethoscope.cli.main import cli
from stethoscope.detect.step_time_alias import CLOCK, STEP, judge_times
from stethoscope.logtext.console_reader import ConsoleReader
from stethoscope.records import DATA_WAIT, STEP_TIME

# (a step line with the step time `t` seconds printed as trainers print it; {s}: the step, {l}: the loss)
SHAPES = {
    "timm Batch (t) with its running average": "Train: [{s}/5000]  Batch (t) {t:.3f} (0.250)  Loss {l} (2.2)  LR 1.0e-04",
    "MMDet Time and Data pairs": "Epoch: [1][{s}/5000]  Time {t:.3f} (0.250)  Data 0.010 (0.011)  Loss {l} (2.2)",
    "interval_runtime": "step {s} | loss {l} | interval_runtime {t:.3f} | lr 1e-4",
    "seconds:": "it={s} loss={l} seconds: {t:.3f}",
    "time: in ms without a unit": "step {s} | loss {l} | time: {ms:.0f}",
    "batch_time=": "step {s} loss={l} batch_time={t:.3f}",
    "iter_time with ms": "step {s} loss {l} iter_time {ms:.1f}ms",
    "step_time(ms):": "step {s} loss: {l} step_time(ms): {ms:.1f}",
    "elapsed_time_per_iteration (ms)": "iteration {s} | elapsed_time_per_iteration (ms): {ms:.1f} | loss {l}",
    "elapsed time per iteration (ms)": "iteration {s} | elapsed time per iteration (ms): {ms:.1f} | loss {l}",
    "iteration_time without a unit, in ms": "step {s} loss {l} iteration_time: {ms:.0f}",
    "step time (s)": "step {s} | loss {l} | step time (s): {t:.3f}",
}


def _log(shape: str, lines: int, slow_from: int | None = None) -> tuple[str, dict[int, float]]:
    rng = random.Random(0)
    text, truth = [], {}
    for s in range(1, lines + 1):
        t = round(0.25 * (1 + 0.05 * rng.random()) * (1.6 if slow_from and s >= slow_from else 1.0), 3)
        text.append(shape.format(s=s, l=f"{3 - s / 1e4:.4f}", t=t, ms=t * 1000))
        truth[s] = t
    return "\n".join(text) + "\n", truth


def _read(text: str) -> dict[str, dict[int, float]]:
    reader = ConsoleReader("train.log")
    reader.feed(text.encode())
    run = reader.result()
    out: dict[str, dict[int, float]] = {}
    for name, step, value, _ in zip(*run.columns):
        out.setdefault(name, {})[int(step)] = float(value)
    return out


@pytest.mark.parametrize("lines", [40, 3000])  # line by line, and a shape at a time
@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_step_time_under_any_common_name_is_read_in_seconds(shape: str, lines: int) -> None:
    text, truth = _log(SHAPES[shape], lines)
    got = _read(text)[STEP_TIME]
    assert sorted(got) == sorted(truth)
    assert all(got[s] == pytest.approx(truth[s], abs=1e-6) for s in truth)


@pytest.mark.parametrize("line", [
    "step {s} | loss {l} | data time {t:.3f}", "step {s} | loss {l} | data_time: {t:.3f}",
    "Epoch: [1][{s}/5000]  Data {t:.3f} ({t:.3f})  Loss {l} (2.2)",
    "step {s} | loss {l} | eval runtime {t:.3f}", "step {s} | loss {l} | time: 20261127",  # a date
])
def test_a_data_wait_an_eval_runtime_or_a_date_is_not_the_step_time(line: str) -> None:
    text, _ = _log(line, 40)
    assert STEP_TIME not in _read(text)


def test_a_data_time_is_the_data_wait() -> None:
    text, truth = _log("step {s} | loss {l} | time {t:.3f} | data time {ms:.0f}ms", 40)
    got = _read(text)
    assert got[DATA_WAIT][7] == pytest.approx(truth[7]) and got[STEP_TIME][7] == pytest.approx(truth[7])


def test_a_unit_less_clock_is_a_clock_in_seconds_and_its_differences_the_step_time() -> None:
    """`time: 812.0, 1624.5, ...` grows with the steps: seconds since the start, whatever its magnitude."""
    text = "".join(f"step {s} | loss 2.0 | time: {1000.0 + 812.5 * s:.1f}\n" for s in range(1, 41))
    got = _read(text)
    assert got[STEP_TIME][10] == pytest.approx(812.5)
    assert "perf/train_time_s" in got


def test_the_rule_names_clocks_levels_units_and_no_duration() -> None:
    assert judge_times([250.0, 260.0, 255.0, 262.0], 0.0) == (STEP, 1e-3)  # unit-less level of 30 and more: ms
    assert judge_times([0.25, 0.26, 0.255], 0.0) == (STEP, 1.0)
    assert judge_times([250.0, 260.0, 255.0], 1.0) == (STEP, 1.0)  # the name's unit wins
    assert judge_times([10.0, 20.0, 31.0, 40.5], 0.0) == (CLOCK, 1.0)
    assert judge_times([0.21, 0.421, 0.478], 1.0) == (STEP, 1.0)  # three step times in order: 1 log in 20
    assert judge_times([1.7e9 + i for i in range(8)], 0.0) == (CLOCK, 1.0)  # a timestamp: rises every record
    assert judge_times([20261127.0] * 5, 0.0) is None  # a date
    assert judge_times([0.2, -0.1, 0.3], 1.0) is None


def test_a_slowdown_in_a_batch_t_column_is_diagnosed(tmp_path: Path) -> None:
    """timm/MMDet's `Batch (t) 0.253 (0.250)`: the injected slowdown from step 600 is a throughput warning."""
    text, _ = _log(SHAPES["timm Batch (t) with its running average"], 1000, slow_from=600)
    path = tmp_path / "train.log"
    path.write_text(text)
    res = CliRunner().invoke(cli, ["diagnose", str(path)])
    assert "throughput_drop at step 6" in res.output and "WARNING" in res.output, res.output
