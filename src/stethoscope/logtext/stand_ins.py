"""Series a log gives only through another one, read as the one it stands for: the loss as a cross-entropy
(OpenNMT's `xent`, a bare `nll`) or a perplexity (`ppl`: the loss is its log) when no loss is named, and
the step time as a rate of steps (t5x's `timing/steps_per_second`: the step time is its inverse) when no
step time is printed; the train loss an eval estimates (`eval/train_loss`, nanoGPT's `step N: train loss ..,
val loss ..`) when no record prints one. A named loss or step time always wins: these are stand-ins, never a second series."""

from __future__ import annotations

import math
from typing import Any

from stethoscope.detect.names import CROSS_ENTROPY
from stethoscope.logtext.columns import Columns
from stethoscope.logtext.eval_lines import TRAIN_ESTIMATE
from stethoscope.records import EVAL_LOSS, LOSS, STEP_TIME

PERPLEXITY = "train/ppl"
STEPS_PER_S = "perf/steps_per_s"
_RENAMED = {CROSS_ENTROPY: LOSS, f"eval/{CROSS_ENTROPY.split('/', 1)[1]}": EVAL_LOSS}
# (stand-in, the series it stands for, its value from the stand-in's; None: no value, left out)
_DERIVED = ((PERPLEXITY, LOSS, lambda v: math.log(v) if v > 0 or v != v else None),  # NaN stays NaN, 0 is none
            (STEPS_PER_S, STEP_TIME, lambda v: 1.0 / v if 0 < v < math.inf else None))


def stand_ins(columns: Any) -> Any:
    """`columns` (lists or coded) with the stand-ins read as what they stand for: the list form when
    anything changes (a cross-entropy renamed, log-perplexities and inverted rates appended after the
    logged points, at their steps)."""
    used = set(columns.labels) if hasattr(columns, "labels") else set(columns.names)
    rename = {name: to for name, to in _RENAMED.items() if name in used and to not in used}
    if TRAIN_ESTIMATE in used and LOSS not in used and CROSS_ENTROPY not in used:  # (`eval_lines.estimates`)
        rename[TRAIN_ESTIMATE] = LOSS  # an eval's estimates of the train loss, and no record of it: the train loss
    derive = [(name, to, f) for name, to, f in _DERIVED
              if name in used and to not in used and to not in rename.values()]
    if not rename and not derive:
        return columns
    columns = Columns(*columns)
    if rename:
        columns.names[:] = [rename.get(n, n) for n in columns.names]
    for name, to, f in derive:
        found = [(step, f(v), time) for n, step, v, time in zip(*columns) if n == name]
        for step, v, time in found:
            if v is not None:
                for column, item in zip(columns, (to, step, v, time)):
                    column.append(item)
    return columns
