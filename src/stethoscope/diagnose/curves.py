"""Whole-curve classification of a training run from arrays (numpy).

One label for the train-loss curve, one for the eval curve, and one for the run:

    healthy · converged · underfitting (still falling at the end) · overfitting (eval rises while
    train falls) · explosion (ends non-finite or far above where it started) · divergence (a
    sustained rise after the best point) · cliff (one jump up to a level it never leaves) ·
    spike_and_recover · sawtooth (large oscillations: LR too high) · plateau_high (no learning from
    the start, e.g. bad label masking) · too_short

Long curves are summarised in at most `_BLOCKS` block medians first, so a 1M-point curve costs a
few numpy passes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

CURVE_LABELS = (
    "healthy", "converged", "underfitting", "overfitting", "explosion", "divergence", "cliff",
    "spike_and_recover", "sawtooth", "plateau_high", "too_short",
)
_PRIORITY = ("explosion", "divergence", "cliff", "overfitting", "plateau_high", "sawtooth", "spike_and_recover",
             "underfitting", "converged", "healthy", "too_short")
# Curve labels the diagnosis compares against: a vocabulary of their own that shares two finding types' spelling
HEALTHY_CURVE, UNDERFITTING_CURVE = "healthy", "underfitting"
_BLOCKS = 200
_MIN_POINTS = 20  # fewer finite values (an excerpt) get "too_short" rather than a guess
_MIN_SPARSE = 8  # ... unless logged every k > 1 steps over at least _MIN_POINTS steps (`_sparse_enough`): 8, so
# that the opening and closing windows (3 records each) do not overlap
_SPIKE_SIGMA = 6.0
_SPIKE_MIN_REL = 0.3


@dataclass(slots=True)
class CurveClass:
    """The shape of one curve: a label from CURVE_LABELS, a sentence, and the numbers behind it."""

    label: str
    detail: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "detail": self.detail, "evidence": self.evidence}


def classify_run(train_steps: Any, train_values: Any, eval_steps: Any = None, eval_values: Any = None,
                 vocab_size: int | None = None) -> dict[str, Any]:
    """Classify the train curve and the eval curve; the run's label is the most serious of the two."""
    train = classify_train(train_steps, train_values, vocab_size)
    ev = classify_eval(eval_steps, eval_values, train_steps, train_values) if eval_values is not None else None
    labels = [train.label] + ([ev.label] if ev is not None else [])
    label = min(labels, key=_PRIORITY.index)
    detail = train.detail if label == train.label or ev is None else ev.detail
    return {"label": label, "detail": detail, "train": train.to_dict(), "eval": ev.to_dict() if ev else None}


def classify_train(steps: Any, values: Any, vocab_size: int | None = None) -> CurveClass:
    s, v = _arrays(steps, values)
    if v.size == 0:
        return CurveClass("too_short", "no train loss logged")
    if not math.isfinite(v[-1]):
        first_bad = int(s[np.argmax(~np.isfinite(v))])
        return CurveClass("explosion", f"the loss became non-finite at step {first_bad} and stayed so",
                          {"first_nonfinite_step": first_bad})
    ok = np.isfinite(v)
    s, v = s[ok], v[ok]
    if v.size < _MIN_POINTS and not _sparse_enough(s):
        return CurveClass("too_short", f"only {v.size} finite loss value{'s' * (v.size != 1)}: too few to classify "
                          "the curve", {"points": int(v.size)})
    return _shape(s, v, vocab_size)


def _sparse_enough(s: np.ndarray) -> bool:
    """A curve logged every k > 1 steps (the HF Trainer's `logging_steps`: each record the mean over its interval)
    is as long as the steps it covers: at least `_MIN_SPARSE` records over at least `_MIN_POINTS` steps. The same
    run recorded at every step (its live store) is classified, so its log is too, and the two views agree (user
    trial: the live run said "still improving", its trainer_state.json nothing)."""
    if s.size < _MIN_SPARSE:
        return False
    gap = float(np.median(np.diff(s)))
    return gap > 1 and (float(s[-1] - s[0]) + gap) >= _MIN_POINTS


def classify_eval(steps: Any, values: Any, train_steps: Any = None, train_values: Any = None) -> CurveClass | None:
    s, v = _arrays(steps, values)
    ok = np.isfinite(v)
    s, v = s[ok], v[ok]
    if v.size < 3:
        return None
    best = int(np.argmin(v))
    last = float(np.median(v[-3:])) if v.size - best > 3 else float(v[-1])
    floor = float(np.median(v[max(0, best - 1): best + 2]))  # the minimum's neighbourhood, not one lucky eval
    rise = (last - float(v[best])) / (abs(float(v[best])) or 1e-12)
    noise = _noise(v)
    ev = {"best_step": int(s[best]), "best": float(v[best]), "last": last, "rise": rise, "evals": int(v.size),
          "noise": noise}
    significant = rise >= 0.02 and last - floor > 3 * noise
    if best < v.size - 1 and significant and _train_fell(train_steps, train_values, int(s[best])):
        return CurveClass("overfitting", f"eval loss bottomed out at step {int(s[best])} ({float(v[best]):.4g}) and "
                                         f"rose {rise:.1%} while the train loss kept falling", ev)
    if v[-1] < v[0]:
        return CurveClass("healthy", f"eval loss fell {float(v[0]):.4g} -> {last:.4g}", ev)
    return CurveClass("plateau_high", f"eval loss did not improve ({float(v[0]):.4g} -> {last:.4g})", ev)


# -- the train curve --------------------------------------------------------------------------------
_OPENING = 3  # first records whose median is where the run opened (one odd first record is not its level)


def _arrays(steps: Any, values: Any) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(steps if steps is not None else [], dtype=np.float64)
    v = np.asarray(values if values is not None else [], dtype=np.float64)
    n = min(s.size, v.size)
    return s[:n], v[:n]


def _blocks(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Block medians and the index where each block starts (at most _BLOCKS blocks)."""
    if v.size <= _BLOCKS:
        return v.copy(), np.arange(v.size)
    edges = np.linspace(0, v.size, _BLOCKS + 1).astype(np.int64)
    if v.size % _BLOCKS == 0:
        return np.median(v.reshape(_BLOCKS, -1), axis=1), edges[:-1]
    return np.array([np.median(v[a:b]) for a, b in zip(edges[:-1], edges[1:])]), edges[:-1]


def _noise(v: np.ndarray) -> float:
    """Robust step-to-step noise (MAD of differences / sqrt 2), on at most 100k points."""
    d = np.diff(v[-100_000:])
    if d.size == 0:
        return 0.0
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2))


def _shape(s: np.ndarray, v: np.ndarray, vocab_size: int | None) -> CurveClass:
    m, starts = _blocks(v)
    n_edge = max(3, m.size // 20)
    start = float(np.median(m[:n_edge]))
    end = float(np.median(m[-max(3, m.size // 10):]))
    best_i = int(np.argmin(m))
    best = float(m[best_i])
    sigma = _noise(v)
    scale = abs(start) or 1e-12
    progress = (start - best) / scale
    ev: dict[str, Any] = {"start": start, "end": end, "best": best, "best_step": int(s[starts[best_i]]),
                          "progress": progress, "noise": sigma, "points": int(v.size)}
    verdict = (_explosion(s, v, start, best, ev) or _rise(s, m, starts, best_i, best, end, sigma, ev)
               or _plateau(start, end, progress, vocab_size, ev, _opened(v, start, best)) or _sawtooth(m, end, ev)
               or _spikes(s, v, m, starts, sigma, ev) or _ending(s, m, starts, end, sigma, ev))
    return verdict


def _explosion(s: np.ndarray, v: np.ndarray, start: float, best: float, ev: dict[str, Any]) -> CurveClass | None:
    tail = v[-max(3, v.size // 20):]
    top = float(np.max(tail))
    if top > max(10 * abs(best), abs(start) * 2) and top > start:
        return CurveClass("explosion", f"the loss blew up to {top:.4g} at the end (best {best:.4g}, start {start:.4g})", ev)
    return None


def _rise(s: np.ndarray, m: np.ndarray, starts: np.ndarray, best_i: int, best: float, end: float, sigma: float,
          ev: dict[str, Any]) -> CurveClass | None:
    if best_i >= m.size - max(2, m.size // 10):
        return None
    rise = end - best
    if rise < max(0.2 * abs(best), 3 * sigma, 1e-12):
        return None
    after = m[best_i:]
    jumps = np.diff(after)
    big = int(np.argmax(jumps)) if jumps.size else 0
    step_of = int(s[starts[best_i + big + 1]]) if jumps.size else int(s[starts[best_i]])
    ev.update(rise=rise, rise_from_step=int(s[starts[best_i]]))
    if jumps.size and jumps[big] >= 0.7 * rise and np.all(after[big + 1:] >= best + 0.5 * rise):
        return CurveClass("cliff", f"the loss jumped up at step ~{step_of} to a level it never left "
                                   f"({best:.4g} -> {end:.4g})", {**ev, "jump_step": step_of})
    return CurveClass("divergence", f"the loss rose from its best {best:.4g} (step {ev['rise_from_step']}) to "
                                    f"{end:.4g} at the end and did not come back", ev)


def _opened(v: np.ndarray, start: float, best: float) -> float:
    """The progress from where the run opened: its first records (their median), when above the first blocks'
    level. A warm-up's fast first drop (LLaMA-Factory 2.35 -> 2.05 in 60 of 2178 steps, then 2.05 -> 1.97) sits
    inside the first blocks, whose median takes the level after it: learning, not a curve that never came down."""
    opening = max(start, float(np.median(v[:_OPENING])))
    return (opening - best) / (abs(opening) or 1e-12)


def _plateau(start: float, end: float, progress: float, vocab_size: int | None, ev: dict[str, Any],
             opened: float | None = None) -> CurveClass | None:
    if progress >= 0.1 or (opened is not None and opened >= 0.1) or start == 0.0:
        return None  # (a loss at 0 from its start, a tiny one printed as 0, has nothing to come down from)
    msg = f"the loss never improved ({start:.4g} -> {end:.4g}, {max(progress, 0):.1%} at best): no learning"
    if vocab_size:
        ln_v = math.log(vocab_size)
        ev["ln_vocab"] = ln_v
        if end >= 0.6 * ln_v:
            msg += f"; it sits at {end / ln_v:.0%} of ln(vocab)={ln_v:.3g} (uniform guess)"
    return CurveClass("plateau_high", msg, ev)


def _sawtooth(m: np.ndarray, end: float, ev: dict[str, Any]) -> CurveClass | None:
    half = m[m.size // 2:]
    if half.size < 12:
        return None
    x = np.arange(half.size, dtype=np.float64)
    trend = np.polyval(np.polyfit(x, half, 1), x)
    r = half - trend
    amp = float(1.4826 * np.median(np.abs(r)))
    d = np.diff(half)
    flips = float(np.mean(np.signbit(d[1:]) != np.signbit(d[:-1]))) if d.size > 2 else 0.0
    if amp >= 0.1 * (abs(end) or 1e-12) and flips >= 0.3:
        ev.update(oscillation=amp / (abs(end) or 1e-12), direction_changes=flips)
        return CurveClass("sawtooth", f"the loss swings +-{amp / abs(end):.0%} around its trend: LR too high?", ev)
    return None


def _spikes(s: np.ndarray, v: np.ndarray, m: np.ndarray, starts: np.ndarray, sigma: float,
            ev: dict[str, Any]) -> CurveClass | None:
    local = np.repeat(m, np.diff(np.append(starts, v.size)))
    spikes = np.flatnonzero((v > local + _SPIKE_SIGMA * max(sigma, 1e-12)) & (v > local * (1 + _SPIKE_MIN_REL)))
    if spikes.size == 0:
        return None
    ev.update(spikes=int(spikes.size), first_spike_step=int(s[spikes[0]]))
    return CurveClass("spike_and_recover", f"{spikes.size} loss spike(s), the first at step {int(s[spikes[0]])}, "
                                           "and the curve came back", ev)


def _ending(s: np.ndarray, m: np.ndarray, starts: np.ndarray, end: float, sigma: float,
            ev: dict[str, Any]) -> CurveClass:
    at = s[starts]  # the last fifth of the run's steps (at least 3 records), not of its records: a log of interval
    tail = max(3, int(np.count_nonzero(at >= at[-1] - 0.2 * (at[-1] - at[0]))))  # means ends as its live store
    x = s[starts[-tail:]]
    y = m[-tail:]
    slope = float(np.polyfit(x, y, 1)[0]) if x.size >= 2 and np.ptp(x) > 0 else 0.0
    drop = -slope * float(np.ptp(x))
    ev.update(end_slope=slope, end_drop=drop)
    if drop >= max(0.05 * (abs(end) or 1e-12), 3 * sigma / math.sqrt(max(1, tail))):
        return CurveClass("underfitting", f"the loss was still falling at the end ({drop:.3g} over the last "
                                          f"{int(np.ptp(x))} steps): more steps would help", ev)
    return CurveClass("converged", f"the loss came down {ev['start']:.4g} -> {end:.4g} and flattened out", ev)


def _train_fell(train_steps: Any, train_values: Any, at_step: int) -> bool:
    if train_values is None:
        return True
    s, v = _arrays(train_steps, train_values)
    ok = np.isfinite(v)
    s, v = s[ok], v[ok]
    if v.size < 2:
        return True
    before = v[s <= at_step]
    after = v[s > at_step]
    if before.size == 0 or after.size == 0:
        return True
    k = max(1, min(before.size, after.size, 5))
    return float(np.median(after[-k:])) < float(np.median(before[-k:]))
