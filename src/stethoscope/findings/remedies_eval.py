"""Causes and fixes of `eval_broken` (kept beside `findings.remedies`, which is at its size limit); merged into
`ADVICE` by `findings.advice`."""

from __future__ import annotations

from stethoscope.findings.catalogue import EVAL_BROKEN
from stethoscope.findings.remedies import Advice, _r

EVAL_ADVICE = {
    EVAL_BROKEN: Advice((
        _r("the eval reads labels the model never trains on: a wrong class map, label files or annotation paths of "
           "the val set, or a label offset (0- vs 1-based)",
           "evaluate on a few training batches: a metric that is still 0 there is the eval's bug, not the model's"),
        _r("the eval's post-processing drops every prediction (a score threshold above every score, boxes in the "
           "wrong format or scale, a metric over the wrong output head)",
           "print a few raw predictions beside their targets from inside the eval"),
        _r("the model collapsed to one output (a constant class, no boxes): its loss still moves, its answers do not",
           "check the predicted class histogram; overfit one batch and watch the metric move"),
    )),
}
