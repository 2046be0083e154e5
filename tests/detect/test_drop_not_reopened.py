"""A slowdown that came back to normal is over: it is not reopened over the records it was priced on
(`detect.throughput.ThroughputDetector._block_check`, `drop_end`).

wild-logs-5 F5: a TRL console's step time comes from tqdm's smoothed `s/it`, so an eval's 5 minutes read as a
step of 110 s decaying over 15 steps (84, 65, 52, ... 21.8) back to the usual 21.4 s. The slowdown closed at
"back to normal" as a passing one (info, priced as a stall), then the noisy-series check found a level shift
over the same window, reopened it from the same step, and priced those seconds again: "WARNING throughput_drop
... step time up 4% (21.38 -> 22.15 s) ... costing 2.3%". A real slowdown later on is still found. And a passing slowdown whose excess seconds the evals
logged inside it took (`eval/runtime_s`) is their own time (`throughput_findings.eval_paid`): info.
"""

from __future__ import annotations

import random

from stethoscope.detect.throughput import ThroughputDetector

from .conftest import make_records, of_type, replay

_DECAY = [110.7, 83.7, 65.0, 52.0, 43.0, 36.4, 32.0, 28.8, 26.6, 25.0, 23.8, 22.8, 22.4, 22.1, 21.9, 21.8, 21.7, 21.6,
          21.6, 21.5]


def _times(slow_from: int | None = None, n: int = 600) -> list[float]:
    rng = random.Random(0)
    t = [21.4 * (1 + rng.gauss(0, 0.004)) for _ in range(n)]
    t[200:200 + len(_DECAY)] = [x * (1 + rng.gauss(0, 0.003)) for x in _DECAY]
    if slow_from is not None:
        t[slow_from:] = [x * 1.3 for x in t[slow_from:]]
    return t


def test_an_eval_read_through_a_smoothed_rate_pages_no_slowdown() -> None:
    found = replay(ThroughputDetector(), make_records(range(1, 601), STEP_TIME=_times()))
    assert not [f for f in of_type(found, "throughput_drop") if f.severity != "info"], \
        [(f.step, f.severity, f.message) for f in of_type(found, "throughput_drop")]


def test_a_real_slowdown_after_it_is_still_a_warning() -> None:
    found = replay(ThroughputDetector(), make_records(range(1, 601), STEP_TIME=_times(slow_from=350)))
    assert [f.step for f in of_type(found, "throughput_drop") if f.severity == "warning"] == [351], \
        [(f.step, f.severity) for f in of_type(found, "throughput_drop")]


_EVAL_DECAY = [202.7, 150.0, 110.0, 80.0, 60.0, 45.0, 35.0, 28.0, 23.0, 19.0, 16.0, 14.4, 12.5, 11.0, 10.0, 9.6, 9.3, 9.1,
               9.0, 8.9, 8.9, 8.8, 8.8, 8.7, 8.7]


def _hf_eval(runtime: float | None) -> list:
    """An HF console read through tqdm's smoothed s/it (7 s a step), an eval at step 200 whose time spreads over the
    steps after it; the eval's own record (`eval/runtime_s`) lands at step 203, inside that slowdown."""
    rng = random.Random(1)
    n = 244
    t = [7.0 * (1 + rng.gauss(0, 0.01)) for _ in range(n)]
    t[200:200 + len(_EVAL_DECAY)] = _EVAL_DECAY
    recs = make_records(range(1, n + 1), STEP_TIME=t)
    recs[202].values["eval/loss"] = 0.5166
    if runtime is not None:
        recs[202].values["eval/runtime_s"] = runtime
    return of_type(replay(ThroughputDetector(), recs), "throughput_drop")


def test_a_slowdown_the_logged_eval_time_pays_for_is_the_evals_own_time() -> None:
    # wild-logs-5 LMSYS (once the readers read its eval dict): WARNING throughput_drop "step time up 27% (7 -> 8.86 s)
    # ... costing 11.2%", inside which the eval logged `eval_runtime: 642.6`
    (f,) = [f for f in _hf_eval(642.6) if f.step == 201]
    assert f.severity == "info" and f.evidence["eval_time"] is True and "eval/runtime_s" in f.message, f


def test_the_same_slowdown_with_no_eval_time_logged_is_a_warning() -> None:
    (f,) = [f for f in _hf_eval(None) if f.step == 201]
    assert f.severity == "warning" and "eval_time" not in f.evidence, f
