"""A step time printed as a running mean (mmengine's `time`: the mean of the last 10 iterations, printed every
4) shows a slowdown only as far as the slow steps fill its window: a jump climbs over the window's steps, a
ramp's straight part points back half a window after its start. The onset is fitted to the means as the
averages of their windows (`detect.slowdown.window_onset`), not to the records as if each were one step."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from stethoscope.detect.config import DetectConfig
from stethoscope.detect.slowdown import window_onset
from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers.registry import read_any


def _console(onset: int, extra: Callable[[int], float], steps: int = 256, seed: int = 0) -> str:
    """mmengine's LoggerHook lines of an iteration-based loop (interval 4, window 10, an eval every 32
    iterations whose time lands in the next iteration's data_time, as the Runner measures it); each
    iteration's time 0.6 ms +-5%, plus `extra(step - onset)`."""
    rng = random.Random(seed)
    times: list[float] = []
    waits: list[float] = []
    lines = []
    for i in range(1, steps + 1):
        wait = 0.0002 + (2.0 if i > 1 and (i - 1) % 32 == 0 else 0.0)
        times.append(wait + 0.0006 * (1 + 0.05 * rng.random()) + extra(i - onset))
        waits.append(wait)
        if i % 4 == 0:
            m, d = sum(times[-10:]) / len(times[-10:]), sum(waits[-10:]) / len(waits[-10:])
            loss = 1.3 - 0.5 * i / steps + 0.01 * rng.random()
            lines.append(f"11/27 09:05:31 - mmengine - INFO - Iter(train) [{i:3d}/{steps}]  lr: 1.0000e-03  "
                         f"eta: 0:00:12  time: {m:.4f}  data_time: {d:.4f}  loss: {loss:.4f}")
        if i % 32 == 0:
            lines.append(f"11/27 09:05:31 - mmengine - INFO - Iter(val) [2/2]    val/loss: {1.3 - 0.4 * i / steps:.4f}"
                         "  data_time: 0.0009  time: 0.0011")
    return "\n".join(lines) + "\n"


def _drops(tmp_path: Path, text: str, config: DetectConfig | None = None) -> list[int]:
    path = tmp_path / "console.log"
    path.write_text(text)
    (run,) = read_any(path)
    assert run.meta["running_means"]["perf/step_time_s"] == 10  # mmengine's default window, read by the importer
    return [f.step for f in diagnose_run(run, config=config).findings if f.type == "throughput_drop"]


def _ramp(k: int) -> float:
    return 0.0006 * k if k >= 0 else 0.0  # each step 0.6 ms slower than the one before


def _jump(k: int) -> float:
    return 0.004 if k >= 0 else 0.0  # every step 4 ms slower


@pytest.mark.parametrize("onset,extra", [(101, _ramp), (147, _ramp), (133, _jump)],
                         ids=["ramp101", "ramp147", "jump133"])
def test_a_slowdown_under_a_running_mean_is_dated_at_its_onset(tmp_path: Path, onset: int,
                                                                  extra: Callable[[int], float]) -> None:
    # dated record by record: 108, 152, 140 (the first mean that stands out, up to a window late)
    steps = _drops(tmp_path, _console(onset, extra))
    assert steps and abs(steps[0] - onset) <= 2, steps


def test_the_window_is_what_moves_the_date(tmp_path: Path) -> None:
    # the same log read as if each record were one step's time: the first mean that stands out, later
    steps = _drops(tmp_path, _console(133, _jump), DetectConfig(step_time_window=1))
    assert steps and steps[0] >= 137, steps


def test_records_of_their_own_step_keep_the_record_fit() -> None:
    xs = [float(x) for x in range(0, 40, 4)]
    ys = [0.01] * 5 + [0.02] * 5
    assert window_onset(xs, ys, 5, None) == 20
    assert window_onset(xs, ys, 5, 1) == 20
    # the same records as means of 10 steps: a jump that fills the window by step 20 began at step 11 or later
    assert 11 <= window_onset(xs, ys, 5, 10) <= 20
    # two records cannot date a change inside a window (before: step -9, before the log began)
    assert window_onset([0.0, 4.0], [0.01, 0.5], 1, 10) == 4


def test_a_window_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="step_time_window"):
        DetectConfig(step_time_window=0)
