"""A train-loss term that is exactly 0 on every record while the total is not (`zero_terms`).

A detector's box or DFL loss of exactly 0 from its first epoch means that term never had a target: no box was
matched (empty or unread label files, a wrong class map), so the model is not trained for what the term teaches.
Alone it may be a term switched off on purpose (an auxiliary loss logged as 0, the class loss of a single-class
YOLO: wild and wild3 hold three such): info. When quality metrics the
run logs (mAP, recall, precision, accuracy) that were above 0 fall to exactly 0 and stay there, the run is
degenerate, and a person should stop it: warning (wild-logs-5 X1, a YOLOv8 results.csv: `train/box_loss` and
`train/dfl_loss` 0 in all 50 rows, `metrics/mAP50(B)` and `metrics/recall(B)` exactly 0 from epoch 15).
Used by `diagnose.engine`."""

from __future__ import annotations

import re

import numpy as np

from stethoscope.diagnose.table import Table
from stethoscope.findings.catalogue import LABEL_MASKING
from stethoscope.records import LOSS, Finding

_MIN_RECORDS = 10  # a term 0 on this many records (every one) is not a coincidence of rounding
_TAIL = 3  # a quality metric exactly 0 on at least its last this many records (and every one since it fell)
_QUALITY = re.compile(r"(?:^|[/_.])(?:map|mAP|recall|precision|acc|accuracy|f1|auc|iou|miou|dice)", re.IGNORECASE)


def zero_terms(table: Table) -> list[Finding]:
    steps, total = table.series(LOSS)
    total = total[np.isfinite(total)]
    if total.size < _MIN_RECORDS or not np.any(total != 0):
        return []
    zero = []
    for name in table.names:
        low = name.lower()
        if name == LOSS or "loss" not in low or not low.startswith("train/"):  # a train term, not a val or smoothed one
            continue
        _, v = table.series(name)
        v = v[np.isfinite(v)]
        if v.size >= _MIN_RECORDS and not np.any(v != 0):
            zero.append(name)
    if not zero:
        return []
    first, last = int(steps[0]), int(steps[-1])
    collapsed = _collapsed(table)
    one = len(zero) == 1
    msg = (f"{', '.join(zero)} {'is' if one else 'are'} exactly 0 on every record (steps {first}-{last}) while {LOSS} "
           f"is not: {'that term gets' if one else 'those terms get'} no target (no box matched, empty or unread "
           f"labels, a wrong class map) or {'is' if one else 'are'} not computed")
    ev = {"zero_terms": zero, "records": int(total.size)}
    sev = "info"
    if collapsed:
        sev = "warning"
        at = min(s for _, s in collapsed)
        msg += (f"; and {', '.join(n for n, _ in collapsed)} fell to exactly 0 from step {at} on: the model learns "
                "nothing of what those terms train (degenerate training): check the labels before training on")
        ev["collapsed_metrics"] = {n: s for n, s in collapsed}
    else:
        msg += "; if the term is switched off on purpose (or is a single-class detector's class loss), nothing to do"
    return [Finding(LABEL_MASKING, sev, first, msg, end_step=last, evidence=ev, source="verdicts",
                    causes=["the term never had a target: empty or unread label files, labels in the wrong format or "
                            "class map, or every target filtered out", "the term is switched off in the config"],
                    fixes=["open a few label files and plot their boxes on the images; check the class ids and the "
                           "dataset config's paths", "if it is off on purpose, nothing to do"])]


def _collapsed(table: Table) -> list[tuple[str, int]]:
    """Quality metrics that were above 0 and are exactly 0 from some step to the last record (`_TAIL` or more)."""
    out = []
    for name in table.names:
        if "loss" in name.lower() or not _QUALITY.search(name):
            continue
        s, v = table.series(name)
        ok = np.isfinite(v)
        s, v = s[ok], v[ok]
        if v.size <= _TAIL or not np.any(v > 0) or v[-1] != 0:
            continue
        nonzero = np.flatnonzero(v != 0)
        tail = v.size - 1 - int(nonzero[-1])
        if tail >= _TAIL:
            out.append((name, int(s[nonzero[-1] + 1])))
    return out
