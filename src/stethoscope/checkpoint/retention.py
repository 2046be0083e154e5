"""Which checkpoints retention keeps: the newest `keep_last`, the best by a metric, every milestone."""

from __future__ import annotations

import math
from collections.abc import Iterable

from stethoscope.checkpoint.disk import USABLE, CheckpointInfo


def best(infos: list[CheckpointInfo], metric: str | None, mode: str) -> CheckpointInfo | None:
    scored = [(float(i.metrics[metric]), i) for i in infos
              if metric and i.status in USABLE and isinstance(i.metrics.get(metric), (int, float))
              and math.isfinite(float(i.metrics[metric]))]
    if not scored:
        return None
    pick = min if mode == "min" else max
    return pick(scored, key=lambda s: (s[0], -s[1].step) if mode == "min" else (s[0], s[1].step))[1]


def to_delete(infos: list[CheckpointInfo], keep_last: int | None, metric: str | None, mode: str,
              protect: int | None = None, hold: int | Iterable[int] | None = None) -> list[CheckpointInfo]:
    """The usable (ok or unverified) checkpoints that retention removes (never the newest ok one, the best, a milestone,
    `protect`, or the newest at or before each step in `hold`: what an automatic rollback would go back
    to); corrupt and partial ones are left for `ckpt prune --corrupt` to judge."""
    ok = sorted((i for i in infos if i.status in USABLE), key=lambda i: i.step)
    if keep_last is None or not ok:
        return []
    keep = {i.step for i in ok[-max(1, keep_last):]}
    b = best(ok, metric, mode)
    if b is not None:
        keep.add(b.step)
    if protect is not None:
        keep.add(protect)
    for h in (hold,) if isinstance(hold, int) else hold or ():
        held = [i.step for i in ok if i.step <= h]
        if held:
            keep.add(held[-1])
    return [i for i in ok if i.step not in keep and not i.milestone]
