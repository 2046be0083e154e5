"""A record printed twice, by two loggers: the TensorFlow Object Detection API's `Step 100 per-step time 0.5s`
and its loss dict each go through TensorFlow's logger and absl's (`INFO:tensorflow:{'Loss/total_loss': ..`
then `I0724 .. model_lib_v2.py:708] {'Loss/total_loss': ..`). A point that repeats the name and the value of a
point of the same step before it, with no other step between them, is that second copy: it is left out.
A step logged again after others (a resume) keeps its points.

Cost: a few passes of numpy comparisons over the points; a sort only over the steps whose points repeat a name
(none in a log of one line a step): a log of 4M points, one line a step, pays ~8 ms (its read ~0.8 s).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from stethoscope.logtext.coded import CodedColumns, encode
from stethoscope.logtext.console_speed import descends

if TYPE_CHECKING:
    from stethoscope.logtext.coded import AnyColumns


def once(columns: AnyColumns) -> AnyColumns:
    """`columns` without the second copies of twice-logged points (the same object when there are none)."""
    if columns.size < 2 or not descends(columns):  # (a long run's rows: told without laying points out)
        return columns
    coded = encode(columns)
    steps, codes = coded.step_array, coded.codes
    same = steps[1:] == steps[:-1]
    descent = same & (codes[1:] <= codes[:-1])  # a name again within a step's points (or in another order)
    if not descent.any():
        return columns
    bounds = np.concatenate(([0], np.flatnonzero(~same) + 1, [steps.size]))  # where each step run starts
    r = np.searchsorted(bounds, np.flatnonzero(descent), side="right") - 1  # the step run of each descent
    run = r[np.r_[True, r[1:] != r[:-1]]]  # runs to look into, once each (np.unique would import numpy.ma: ~6 ms)
    lengths = bounds[run + 1] - bounds[run]
    at = np.repeat(bounds[run] - (np.cumsum(lengths) - lengths), lengths) + np.arange(int(lengths.sum()))  # their points
    key = np.repeat(run, lengths) * (len(coded.labels) + 1) + codes[at]  # (step run, name)
    values = coded.value_array[at]
    order = np.lexsort((values, key))  # stable: the first copy first
    twin = (key[order][1:] == key[order][:-1]) & (values[order][1:] == values[order][:-1])
    if not twin.any():
        return columns
    keep = np.ones(steps.size, dtype=bool)
    keep[at[order[1:][twin]]] = False
    return _kept(coded, keep)


def _kept(coded: CodedColumns, keep: np.ndarray) -> CodedColumns:
    times = coded.time_list
    if isinstance(times, np.ndarray):
        times = times[keep]
    elif times is not None:
        times = [t for t, k in zip(times, keep.tolist()) if k]
    return CodedColumns(coded.labels, coded.codes[keep], coded.step_array[keep], coded.value_array[keep], times,
                        ordered=coded.ordered)
