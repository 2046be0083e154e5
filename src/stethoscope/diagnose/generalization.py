"""A generalization gap: the train loss fell a lot while the eval loss hardly moved.

`detect.overfit` names an eval loss that bottomed out and rose. An eval loss that never really fell is another
way of not generalizing: DETR on a small custom set logged a test loss of about 55 -> 50 over ten epochs while
its train loss went 49 -> 26 and the COCO AP stayed at 0.000, and the run was called "healthy, converged". The
model is learning the training set, not the task. Warning when it is large and sustained: the train loss fell
at least `_TRAIN_FELL` (start to end), the eval loss fell less than `_SHARE` of that relative fall, and the eval
loss stood at least `_GAP` times the train loss at each of the last `_LAST` evals (over at least `_MIN_EVALS`
evals), and the eval loss never came below where the train loss started: none of the training's progress reached
the held-out data (a Whisper fine-tune whose train loss went 0.23 -> 0.01 while its eval loss went 0.27 -> 0.21
did transfer some: the usual gap of a fine-tune that fits its train set, not this). An eval loss that rose (the
overfitting detector's case) or an overfitting finding already made are left to it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stethoscope.findings.catalogue import OVERFITTING
from stethoscope.records import Finding, severity_rank

_TRAIN_FELL = 0.3
_SHARE = 1 / 3
_GAP = 1.5
_LAST = 3
_MIN_EVALS = 4


def generalization_gap(findings: list[Finding], train: tuple[np.ndarray, np.ndarray],
                       evals: tuple[np.ndarray, np.ndarray],
                       classification: dict[str, Any] | None = None) -> list[Finding]:
    """The gap's finding, dated at the first eval from which the gap held to the end; nothing when the eval curve
    already reads overfitting (its rise is dated where it bottomed out) or a detector said so."""
    if any(f.type == OVERFITTING and severity_rank(f.severity) >= 1 for f in findings):
        return []
    if OVERFITTING in ((classification or {}).get("label"), ((classification or {}).get("eval") or {}).get("label")):
        return []
    ts, tv = _finite(*train)
    es, ev = _finite(*evals)
    if ev.size < _MIN_EVALS or tv.size < 2 * _MIN_EVALS or float(tv[0]) <= 0:
        return []
    k = max(3, tv.size // 20)
    t_start = float(np.median(tv[:k]))
    t_end = float(np.median(tv[-max(3, tv.size // 10):]))
    e_first, e_end = float(ev[0]), float(np.median(ev[-_LAST:]))
    if t_start <= 0 or t_end <= 0 or e_first <= 0:
        return []
    fell_t = (t_start - t_end) / t_start
    fell_e = (e_first - e_end) / e_first
    if fell_t < _TRAIN_FELL or fell_e >= _SHARE * fell_t or float(ev.min()) < t_start:
        return []  # (an eval loss that came below where the train loss started learned something that transfers)
    all_ratios = [float(e) / _train_at(ts, tv, int(s)) for s, e in zip(es, ev)]
    ratios = all_ratios[-_LAST:]
    if min(ratios) < _GAP:
        return []
    since = len(all_ratios) - _LAST
    while since > 0 and all_ratios[since - 1] >= _GAP:
        since -= 1
    ev_out: dict[str, Any] = {"train_start": t_start, "train_end": t_end, "train_fell": round(fell_t, 3),
                              "eval_first": e_first, "eval_end": e_end, "eval_fell": round(fell_e, 3),
                              "eval_over_train": round(min(ratios), 2), "evals": int(ev.size),
                              "gap_since_step": int(es[since])}
    msg = (f"the train loss fell {fell_t:.0%} ({t_start:.4g} -> {t_end:.4g}) while the eval loss moved only "
           f"{fell_e:.0%} ({e_first:.4g} -> {e_end:.4g}) and never came below where the train loss started; at the "
           f"last {_LAST} evals it stood x{min(ratios):.2f} or more "
           "above the train loss: the model is fitting the training set, not generalizing")
    causes = ["the model memorises a small training set (too many epochs or too large a model for the data)",
              "train and eval data differ (a different distribution, preprocessing or labels)"]
    fixes = ["check that the eval metric (accuracy, AP) moves at all; compare a few eval predictions with the labels",
             "more or more varied data, augmentation, regularisation; check the eval set's preprocessing"]
    return [Finding(OVERFITTING, "warning", int(es[since]), msg, end_step=int(es[-1]), evidence=ev_out,
                    source="generalization", causes=causes, fixes=fixes)]


def _finite(s: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s, v = np.asarray(s, dtype=np.float64), np.asarray(v, dtype=np.float64)
    n = min(s.size, v.size)
    ok = np.isfinite(v[:n]) & np.isfinite(s[:n])
    return s[:n][ok], v[:n][ok]


def _train_at(ts: np.ndarray, tv: np.ndarray, step: int) -> float:
    """The train loss's level at `step`: the median of the (at most 5) records up to it."""
    i = int(np.searchsorted(ts, step, side="right"))
    window = tv[max(0, i - 5):max(i, 1)]
    level = float(np.median(window))
    return level if level > 0 else float("inf")
