"""How far above its best a loss level must stay to be a divergence (`detect.trend`), and where a rise began.

`divergence_rise_rel` of the best level; half of it when the LR jumped up off its schedule after the
best level was reached: the cause is known and in the log, so a loss that settles 10-20% higher for good
after it (the LR is too high to learn at, not high enough to blow up) is that jump's divergence, not noise.
The 3-sigma and `divergence_min_steps` conditions hold either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stethoscope.detect.config import DetectConfig
from stethoscope.detect.lr import LrTracker


def rise_rel(config: DetectConfig, lr: LrTracker, best_step: int) -> float:
    jump = lr.last_jump
    after_jump = jump is not None and jump[2] > jump[1] and jump[0] >= best_step
    return config.divergence_rise_rel * (0.5 if after_jump else 1.0)


def left_best(config: DetectConfig, lr: LrTracker, best: Any, tail: Sequence[tuple[int, float]], above: int,
              median_sd: float) -> int:
    """Where a rise after an off-schedule LR jump up (its cause, in the log) began, at or before `above` (where its
    level cleared the margin): after the last raw record within 2 noise sigmas (at the best) of the best level,
    not before the jump. A slow climb clears the margin many records after it began. `best` is the trend's
    (level, step, sd of its median, ...), `median_sd` the sd of a median of its records in sds of one value."""
    jump = lr.last_jump
    if best is None or rise_rel(config, lr, best[3] if len(best) > 3 else best[1]) >= \
            config.divergence_rise_rel or jump is None:
        return above  # no cause in the log to date it by: another detector's jump may own the walk back
    level, sigma = best[0], best[2] / median_sd
    start = above
    for s, v in reversed(tail):
        if s < above and (v <= level + 2 * sigma or s < jump[0]):
            break
        start = min(start, s)
    return start
