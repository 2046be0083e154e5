"""A slowdown that came back to normal is over: it is not reopened over the records it was priced on
(`detect.throughput.ThroughputDetector._block_check`, `drop_end`).

wild-logs-5 F5: a TRL console's step time comes from tqdm's smoothed `s/it`, so an eval's 5 minutes read as a
step of 110 s decaying over 15 steps (84, 65, 52, ... 21.8) back to the usual 21.4 s. The slowdown closed at
"back to normal" as a passing one (info, priced as a stall), then the noisy-series check found a level shift
over the same window, reopened it from the same step, and priced those seconds again: "WARNING throughput_drop
... step time up 4% (21.38 -> 22.15 s) ... costing 2.3%". A real slowdown later on is still found.
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
