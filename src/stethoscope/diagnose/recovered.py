"""A loss spike the run came back from and then learned on past (`learned_on`): what it cost is known only at the
run's end, so the whole-run diagnosis grades it there.

A spike (or a jump that took long to come back) is a warning while it is the news: the loss may not come back, or the
run may never again reach the level it left. When the run came back from it and went on to a final loss level (the
median of its last records) at most `_LEARNED_ON` x the level before the spike, it lost nothing a person could act on
now: info, saying so (wild-logs-6 F4: a custom CSV's epoch loss 0.29 -> 0.43 for 14 of 150 epochs, back at 0.28,
ending at 0.18). A young run's LR spike it came back from but never got below again (a tiny GPT at 2.36 before,
2.33 at its end) keeps its warning: the rest of the run may be what it cost. Used by `diagnose.engine`.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from stethoscope.findings.catalogue import LOSS_SPIKE
from stethoscope.records import Finding

_LEARNED_ON = 0.75  # the final level at most this share of the level before the spike: the run learned on past it
_TAIL = 8  # the last records whose median is the run's final level
_CAME_BACK = ("fully", "slowly")


def learned_on(findings: list[Finding], steps: np.ndarray, values: np.ndarray) -> list[Finding]:
    """`findings` with each recovered loss spike at warning that the run learned on past graded `info`."""
    ok = np.isfinite(values)
    steps, values = steps[ok], values[ok]
    out = []
    for f in findings:
        level = f.evidence.get("level")
        if f.type != LOSS_SPIKE or f.severity != "warning" or f.evidence.get("recovered") not in _CAME_BACK \
                or f.end_step is None or not isinstance(level, (int, float)) or level <= 0:
            out.append(f)
            continue
        after = values[steps > f.end_step]
        if after.size < _TAIL:
            out.append(f)
            continue
        end = float(np.median(after[-_TAIL:]))
        if end > _LEARNED_ON * level:
            out.append(f)
            continue
        g = replace(f, evidence={**f.evidence, "learned_on_to": end}, severity="info")
        g.message += (f"; the run learned on past it (loss {end:.4g} over its last {_TAIL} records, x{end / level:.2f} "
                      "the level before the spike): recovered, nothing lost")
        out.append(g)
    return out
