"""The writer thread's cheaper detector paths (issue 28.2) answer exactly as the code they replaced.

`frozen._siblings` (the name test cached per name) and `open_frozen`'s print pace (C-level map/filter) run on
every record whose loss moved; `ChanceLevelDetector.update` and `HeldOutQuality.push` scan every value of
every record. The replaced code is kept here as the reference and compared on random inputs, bit for bit.
"""

from __future__ import annotations

import math
import random
import re
from collections import deque

import numpy as np
import pytest

from stethoscope.detect import frozen
from stethoscope.detect.chance import ChanceLevelDetector
from stethoscope.detect.frozen import open_frozen
from stethoscope.detect.overfit_quality import HeldOutQuality
from stethoscope.records import EVAL_LOSS, LOSS, StepRecord

_HELD_OUT = re.compile(r"eval|valid|val[/_]|test", re.IGNORECASE)

NAMES = [LOSS, EVAL_LOSS, "train/loss_l1", "train/LOSS_mse", "loss_ce", "val_loss", "valid/loss", "Test/Loss",
         "aux_loss", "opt/lr", "grad/norm", "eval/accuracy", "train/acc", "val/loss_kl", "kl_loss_test",
         "Loss", "train/lossy", "perf/step_time_s", "eval_top1", "accuracy"]
SPECIAL = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1e308, 5e-324, 3, True]


def _ref_siblings(values):
    return {k: x for k, x in values.items() if k != LOSS and "loss" in k.lower() and not _HELD_OUT.search(k)
            and isinstance(x, (int, float)) and math.isfinite(x)}


def _ref_pace(tail):
    old = [x for _, x in tail if math.isfinite(x)]
    if len(old) >= frozen._PACE_RECORDS:
        return (len(old) - 1) / max(1, sum(1 for a, b in zip(old, old[1:]) if a != b))
    return None


def _values(rng):
    names = rng.sample(NAMES, rng.randint(0, len(NAMES)))
    return {n: rng.choice(SPECIAL) if rng.random() < 0.2 else round(rng.gauss(2, 1), rng.randint(0, 4))
            for n in names}


def test_siblings_equal_the_old_test_on_random_records():
    rng = random.Random(0)
    for _ in range(3000):
        values = _values(rng)
        got, want = frozen._siblings(values), _ref_siblings(values)
        assert repr(got) == repr(want)  # same keys, order, values (0.0 vs -0.0, ints, bools)
        assert list(got) == list(want)


def test_siblings_forget_names_past_the_cap(monkeypatch):
    monkeypatch.setattr(frozen, "_NAMES_KEPT", 8)
    frozen._SIBLING_NAMES.clear()
    for i in range(40):
        values = {f"part{i}_loss": 1.0, f"eval{i}_loss": 2.0, "opt/lr": 1e-3}
        assert frozen._siblings(values) == {f"part{i}_loss": 1.0}
    assert len(frozen._SIBLING_NAMES) <= 8 + 3


@pytest.mark.parametrize("kind", ["float", "numpy", "deque", "lists"])
def test_pace_equals_the_old_count_on_random_tails(kind):
    rng = random.Random(hash(kind) & 0xFFFF)
    for _ in range(1500):
        n = rng.randint(0, 40)
        levels = [round(rng.gauss(2, 0.5), rng.randint(0, 3)) for _ in range(rng.randint(1, 4))]
        vals = [rng.choice(SPECIAL[:7]) if rng.random() < 0.1 else rng.choice(levels) for _ in range(n)]
        if kind == "numpy":
            vals = [np.float64(v) for v in vals]
        tail = [(i, v) for i, v in enumerate(vals)]
        if kind == "deque":
            tail = deque(tail, maxlen=32)
        if kind == "lists":  # a tail read back from a state dict
            tail = [list(p) for p in tail]
        fz = open_frozen(None, 7, 1.0, 0.1, {}, tail)
        want = _ref_pace(tail)
        assert repr(fz.get("pace")) == repr(want)
        assert type(fz.get("pace")) is type(want)


def test_the_scans_still_refuse_a_value_that_is_no_number():
    # math.isfinite first, as before: a None value fails the record (counted by the DetectorSet), not skipped
    rec = StepRecord(1, {"eval/accuracy": None, LOSS: 1.0})
    with pytest.raises(TypeError):
        ChanceLevelDetector().update(rec)
    with pytest.raises(TypeError):
        HeldOutQuality().push(1, rec.values)


def test_chance_reads_the_first_accuracy_of_each_record_as_before():
    det = ChanceLevelDetector()
    for s in range(20):
        det.update(StepRecord(s, {"train/acc_x": 5.0, "eval/accuracy": 50.0 + s, "eval/acc": 0.3, LOSS: 2.0}))
    det.update(StepRecord(20, {"eval/accuracy": math.nan, "eval/acc": 0.25}))
    assert det.acc[0] == [0.0, 0.5] and det.acc[-1] == [20.0, 0.25]
    assert len(det.loss) == 20


def _ref_level_shift(det, slow):
    """`ThroughputDetector._level_shift` as it was: `median` of every window, through `quantile`."""
    from stethoscope.detect.throughput_findings import median, quantile

    n = len(slow)
    base = det.raw.values()[: max(0, len(det.raw) - (n - 1))]
    if len(base) < n + 2:
        return {"spread": 0.0, "usual_max": math.nan}
    stride = max(1, n // 4)
    usual = max(median(base[i: i + n]) for i in range(0, len(base) - n + 1, stride))
    if median([x[1] for x in slow]) <= usual * (1 + det.config.drop_min_rel):
        return None
    mid = median(base)
    return {"spread": quantile(sorted(base), 0.9) / mid - 1 if mid > 0 else 0.0, "usual_max": usual}


def test_throughput_level_shift_equals_the_median_of_every_window():
    from stethoscope.detect.throughput import ThroughputDetector

    rng = random.Random(3)
    for _ in range(400):
        det = ThroughputDetector()
        for _ in range(rng.randint(0, 300)):
            x = rng.choice(SPECIAL[:7]) if rng.random() < 0.03 else abs(rng.gauss(0.02, 0.005)) * rng.choice((1, 1, 3))
            det.raw.push(x)
        slow = [[i, abs(rng.gauss(0.05, 0.02))] for i in range(rng.randint(0, 40))]
        assert repr(det._level_shift(slow)) == repr(_ref_level_shift(det, slow))
