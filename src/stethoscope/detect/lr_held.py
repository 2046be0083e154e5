"""A loss rise under an LR jump that is held: a divergence at the rise, not a spike that "recovers".

An LR set by hand (or by a mis-resumed schedule) to tens of times its value and left there makes the loss leap
and then hover well above where it was, coming down only slowly, at the high LR, over many steps: the run has
lost its progress and trains on at an LR it cannot use. Read as a spike, one low value of a noisy per-step
loss "recovered" it after 18 steps (a tiny GPT at x60 its LR: 2.44 -> 4.69, then ~3.0 for a hundred steps).
An LR that jumps and comes straight back (an LR spike) is no such run: its loss jump is a spike.

So a loss incident that opened within `lead_steps` after an upward off-schedule LR jump is a divergence once
the LR is seen still held (at `_HELD` of its jumped value or more) at an LR record after the jump, with the
loss still up. It is withdrawn, as any divergence, when the loss comes back to its level; under the held LR
that is judged on the level (`level_back`: the median of the last `_LEVEL_N` records must be within a
median's noise of it), not on one value of its noise. An LR jump whose loss
leaps and is back within a few records is a spike. Used by `detect.spike`.
"""

from __future__ import annotations

from typing import Any

from stethoscope.detect.lr import LrTracker

_HELD = 0.5  # the LR still at this share of its jumped value: held, not a spike of the LR
_MIN_FACTOR = 3.0  # a jump of at least this factor: one a schedule never makes
_LEVEL_N = 5  # records whose median is the loss's level when its recovery is judged


def held_jump(lr: LrTracker, inc: dict[str, Any], step: int, lead_steps: int) -> list[float] | None:
    """The LR jump [step, before, after] behind the loss incident `inc`, when it is held at `step`; else None."""
    j = lr.last_jump
    if j is None or j[1] <= 0 or j[2] < _MIN_FACTOR * j[1] or not 0 <= inc["start"] - j[0] <= lead_steps:
        return None
    now = lr.prev_lr
    if now is None or now < _HELD * j[2] or step <= j[0] or lr.prev_step is None or lr.prev_step <= j[0]:
        return None
    return j


def held_cause(j: list[float]) -> str:
    return (f"LR jumped {j[1]:.4g} -> {j[2]:.4g} (x{j[2] / j[1]:.3g}) at step {int(j[0])} and stayed there: "
            "the run trains on at an LR it cannot use")


def level_back(inc: dict[str, Any], v: float, floor: float) -> bool:
    """Has the loss's level come back, under a held LR jump? `v` is the incident's latest value (every one is
    passed); the median of the last `_LEVEL_N` must be within a median's noise (2 sigma / sqrt(n), at least
    `floor`) of the level: a loss hovering above its old level dips to within one value's noise by its noise alone."""
    tail = inc.setdefault("tail", [])
    tail.append(v)
    del tail[:-_LEVEL_N]
    if len(tail) < _LEVEL_N:
        return False
    mid = sorted(tail)[_LEVEL_N // 2]
    return mid <= inc["level"] + max(2.0 * inc["data_sigma"] / _LEVEL_N ** 0.5, floor)

