"""An epoch's summary among records counted within epochs, placed at its epoch's end (wild-logs-6 M1).

PaddleViT prints `Epoch[001/100], Step[0100/0196], Avg Loss: 1.0198` (the batch counter within the epoch: global
step 100, and 196 + 100 in epoch 2) and, after each epoch, `----- Epoch[001/100], Train Loss: 1.0238, Train Acc:
0.7581, time: 173.49`, whose only counter is the epoch: read at step 1, 2, 3 .. between the global steps. Every
summary then looked like the counter starting over, and the log was split into 100 "runs" of 2-3 records. A
record with no epoch of its own whose step is the epoch of the records just before it (and below their steps) is
that epoch's summary: its step is the epoch's last (one before the next epoch's first record).
"""

from __future__ import annotations

from typing import Any

from stethoscope.logtext.names import EPOCH

MIN_SUMMARIES = 2  # one record numbered by its epoch may be anything; a ladder of them is the epochs' summaries


def placed(coded: Any) -> Any | None:
    """`coded` (CodedColumns in log order) with its epoch summaries moved to their epochs' ends, or None when it
    holds none."""
    import numpy as np

    if EPOCH not in coded.labels:
        return None
    steps, codes = coded.step_array, coded.codes
    first = np.r_[True, steps[1:] != steps[:-1]]  # a record: the points of one step in a row
    record = np.cumsum(first) - 1
    count = int(record[-1]) + 1
    epochs = np.full(count, -1, dtype=np.int64)
    at = codes == coded.labels.index(EPOCH)
    epochs[record[at]] = coded.value_array[at].astype(np.int64)
    starts = steps[first]
    moved: dict[int, int] = {}  # record -> its epoch
    last_epoch, last_step = -1, None
    for k in range(count):
        if epochs[k] >= 0:
            last_epoch, last_step = int(epochs[k]), int(starts[k])
        elif last_step is not None and int(starts[k]) == last_epoch < last_step:
            moved[k] = last_epoch
    if len(moved) < MIN_SUMMARIES:
        return None
    ends = _ends(epochs, starts)
    new = starts.copy()
    for k, epoch in moved.items():
        if epoch in ends:
            new[k] = ends[epoch]
    return type(coded)(coded.labels, coded.codes, new[record], coded.value_array, coded.time_list,
                       ordered=coded.ordered, last_time=coded.last_time)


def _ends(epochs: Any, starts: Any) -> dict[int, int]:
    """{epoch: its last step}: one before the next epoch's first record; the last epoch's is its first step plus
    the epochs' usual length, less one."""
    import numpy as np

    firsts: dict[int, int] = {}
    lasts: dict[int, int] = {}
    for epoch, step in zip(epochs.tolist(), starts.tolist()):
        if epoch >= 0:
            firsts.setdefault(epoch, step)
            lasts[epoch] = step
    order = sorted(firsts)
    lengths = [firsts[b] - firsts[a] for a, b in zip(order, order[1:]) if b == a + 1]
    length = int(np.median(lengths)) if lengths else 0
    out = {}
    for epoch in order:
        following = firsts.get(epoch + 1)
        end = following - 1 if following is not None else firsts[epoch] + length - 1
        out[epoch] = max(end, lasts[epoch])
    return out
