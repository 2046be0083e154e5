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
from dataclasses import replace

import numpy as np

from stethoscope.diagnose.table import Table
from stethoscope.findings.catalogue import EVAL_BROKEN, LABEL_MASKING, OVERFITTING
from stethoscope.records import EVAL_LOSS, LOSS, Finding

_MIN_RECORDS = 10  # a term 0 on this many records (every one) is not a coincidence of rounding
_TAIL = 3  # a quality metric exactly 0 on at least its last this many records (and every one since it fell)
_EVALS = 3  # a quality metric exactly the same at every one of at least this many evals
_MOVED = 0.1  # ...while the train loss (median of its first vs its last 3 records) moved by this share of its start
_TASK = re.compile(r"(?:^|[/_.])(?:map|recall|precision|acc|accuracy|f1|auc|iou|miou|dice|top1|top5)(?:$|[/_.@\d])",
                   re.IGNORECASE)  # a task metric's name: `coco/bbox_mAP_50`, `eval/mod_acc` (not `grad_accum`)
_HELD_OUT = re.compile(r"eval|valid|val[/_]|test", re.IGNORECASE)
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


def stuck_evals(findings: list[Finding], table: Table) -> list[Finding]:
    """`findings` and an `eval_broken` warning when every task metric the run evaluates (`_TASK`, not a train one)
    is exactly the same at every eval (`_EVALS` or more), one of them exactly 0, while the train loss moved: the
    eval sees nothing of what the model learns (wild-logs-6 X1: mmdet's `coco/bbox_mAP` 0.0 at all 7 evals while the
    loss fell 43 -> 6; an RF classifier's val `Mod Acc: 0.0000` and `Jam Acc: 0.2920` at every epoch, val loss 18.5
    at the first). An overfitting warning on that eval is its symptom: info, saying so. A metric that moved, none at 0
    (a perfect score held), or an eval loss that improved on its first (a 7-step fine-tune's exact-match 0 while its
    eval loss fell 5.8 -> 3.4 and rose again: overfitting) is no broken eval."""
    steps, loss = table.series(LOSS)
    loss = loss[np.isfinite(loss)]
    if loss.size < 2 * _EVALS:
        return findings
    first, last = float(np.median(loss[:_EVALS])), float(np.median(loss[-_EVALS:]))
    if abs(first - last) <= _MOVED * abs(first):
        return findings
    _, held = table.series(EVAL_LOSS)
    held = held[np.isfinite(held)]
    if held.size >= 2 and float(np.min(held[1:])) < (1 - _MOVED) * held[0]:
        return findings  # the eval's own loss improved on its first: the eval sees what the model learns
    stuck: list[tuple[str, float, int, int, int]] = []
    for name in table.names:
        if "loss" in name.lower() or name.lower().startswith("train/") or not _TASK.search(name):
            continue
        s, v = table.series(name)
        ok = np.isfinite(v)
        s, v = s[ok], v[ok]
        if not _HELD_OUT.search(name) and v.size > loss.size // 2:
            continue  # logged beside the train loss, named for no eval: a train metric (`Training - Mod Acc`)
        if v.size < _EVALS or np.any(v != v[0]):
            return findings  # a task metric that moves (or one evaluated too rarely to say): the eval works
        stuck.append((name, float(v[0]), int(v.size), int(s[0]), int(s[-1])))
    if not any(x == 0 for _, x, *_ in stuck):
        return findings
    zero = [n for n, x, *_ in stuck if x == 0]
    rest = [f"{n} {x!r}" for n, x, *_ in stuck if x != 0]
    evals, at, end = max(k for *_, k, _, _ in stuck), min(a for *_, a, _ in stuck), max(b for *_, b in stuck)
    msg = (f"{', '.join(zero)} {'is' if len(zero) == 1 else 'are'} exactly 0 at every eval ({evals} evals, steps "
           f"{at}-{end})" + (f", and {', '.join(rest)} never moved" if rest else "") + f", while the train loss went "
           f"{first:.4g} -> {last:.4g}: the eval sees nothing the model learns; the model or the eval (its labels, "
           "class map or post-processing) is broken: check the eval before training on")
    ev = {"stuck_metrics": {n: x for n, x, *_ in stuck}, "evals": evals, "train_loss": [first, last]}
    out = []
    for f in findings:
        if f.type == OVERFITTING and f.severity != "info":
            f = replace(f, severity="info", evidence={**f.evidence, "eval_broken": True},
                        message=f.message + "; but the eval's metrics never moved (eval_broken): its loss rising is "
                        "the broken eval, not overfitting")
        out.append(f)
    out.append(Finding(EVAL_BROKEN, "warning", at, msg, end_step=end, evidence=ev, source="verdicts"))
    return out
