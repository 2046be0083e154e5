"""How far above its best a loss level must stay to be a divergence (`detect.trend`).

`divergence_rise_rel` of the best level; half of it when the LR jumped up off its schedule after the
best level was reached: the cause is known and in the log, so a loss that settles 10-20% higher for good
after it (the LR is too high to learn at, not high enough to blow up) is that jump's divergence, not noise.
The 3-sigma and `divergence_min_steps` conditions hold either way.
"""

from __future__ import annotations

from stethoscope.detect.config import DetectConfig
from stethoscope.detect.lr import LrTracker


def rise_rel(config: DetectConfig, lr: LrTracker, best_step: int) -> float:
    jump = lr.last_jump
    after_jump = jump is not None and jump[2] > jump[1] and jump[0] >= best_step
    return config.divergence_rise_rel * (0.5 if after_jump else 1.0)
