"""A slowdown that adds a little to every step starts inside the timer's noise. Its onset is where a ramp
climbing from the old level meets it (`detect.slowdown.ramp_onset`), not the first record that stands out;
a jump the old level's noise cannot explain stays dated at the jump."""

from __future__ import annotations

import random
import statistics
from pathlib import Path

from stethoscope.detect.slowdown import ramp_onset
from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers.registry import read_any

GPT_RUNS = Path(__file__).resolve().parents[1] / "assets" / "gpt_runs"


def _bimodal_ramp(onset: int, n: int, seed: int) -> tuple[list[float], list[float]]:
    """Steps of 5 ms or 10 ms (a CPU timer's two modes, at random), each step from `onset` on 0.3 ms x
    (step - onset) slower: after 10 steps the ramp is 3 ms, inside the 5 ms spread of the modes."""
    rng = random.Random(seed)
    xs = [float(x) for x in range(n)]
    ys = [rng.choice((0.005, 0.010)) * rng.uniform(0.95, 1.05) + 0.0003 * max(0, x - onset) for x in range(n)]
    return xs, ys


def test_a_ramp_inside_bimodal_timer_noise_is_dated_where_it_leaves_the_old_level() -> None:
    errors = []
    for seed in range(40):
        xs, ys = _bimodal_ramp(onset=30, n=60, seed=seed)
        errors.append(abs(xs[ramp_onset(xs, ys)] - 30))
    # the step-only fit: median error 7 steps, 12 of 40 within 3 steps (it waits for the ramp to stand out)
    assert statistics.median(errors) <= 3, sorted(errors)
    assert sum(e <= 3 for e in errors) >= 24, sorted(errors)


def test_a_jump_over_a_noiseless_level_stays_at_the_jump() -> None:
    # a step time printed in whole milliseconds: 2 ms flat, then 4 ms and climbing (Keras's 'ms/step')
    xs = [float(x) for x in range(0, 40)]
    ys = [0.002] * 25 + [0.004, 0.004, 0.006, 0.007, 0.007, 0.008, 0.009, 0.009, 0.010, 0.010, 0.011, 0.012,
                         0.012, 0.013, 0.014]
    assert ramp_onset(xs, ys) == 25


def test_a_clear_step_in_noise_stays_at_the_step() -> None:
    rng = random.Random(3)
    xs = [float(x) for x in range(60)]
    ys = [(0.010 if x < 30 else 0.020) * rng.uniform(0.97, 1.03) for x in range(60)]
    assert ramp_onset(xs, ys) == 30


def test_a_real_tiny_gpt_slowdown_is_dated_at_its_onset() -> None:
    # bench/gpt_runs slowdown-s5 (dev): from iteration 174 each iteration sleeps (k - 174) x 0.2-0.4 ms in the
    # batch fetch, on 5 / 10 ms steps; nanoGPT's console prints every iteration's time. It was dated at 183.
    (run,) = read_any(GPT_RUNS / "slowdown-s5" / "nanogpt.log.gz")
    drops = [f.step for f in diagnose_run(run).findings if f.type == "throughput_drop"]
    assert any(abs(s - 174) <= 2 for s in drops), drops


def test_a_two_record_stall_at_the_end_of_the_window_is_no_new_level() -> None:
    # mmengine's scalars (a 10-iteration running mean of the step time, every 4 iterations): the slowdown's
    # first record at 128, then an eval's stall held by two records (132, 136), then the new level at 140.
    # The stall's second record had only itself and the first beside it, so it stood as 'the new level'
    xs = [float(x) for x in range(64, 141, 4)]
    ys = [0.0052, 0.2071, 0.2057, 0.0071, 0.0063, 0.0079, 0.0056, 0.0052, 0.005, 0.2075, 0.2055, 0.0047, 0.003,
          0.0026, 0.0022, 0.0021, 0.0183, 0.2341, 0.2203, 0.0352]
    assert xs[ramp_onset(xs, ys)] == 128


def test_a_jump_to_a_new_level_that_holds_is_kept_at_the_end_of_the_window() -> None:
    xs = [float(x) for x in range(20)]
    ys = [1.0, 1.02, 0.98, 1.01, 0.99, 1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0, 1.0, 4.0, 4.1, 3.9]
    xs = xs[: len(ys)]
    assert xs[ramp_onset(xs, ys)] == 16


def test_a_real_mmengine_loader_stall_is_dated_at_its_onset() -> None:
    # bench/real_trainers mmengine stall-s2 (dev), vis_data/scalars.json: the loader stalls 0.15 s every 6
    # iterations from 125; the running mean shows it from the record at 128 (+-2 records of 4 iterations).
    root = Path(__file__).resolve().parents[1] / "assets" / "real_trainers" / "mmengine_runner-stall-s2"
    (run,) = read_any(root / "scalars.json.gz")
    found = [f.step for f in diagnose_run(run).findings if f.type in ("throughput_drop", "periodic_stall")]
    assert any(abs(s - 125) <= 8 for s in found), found
