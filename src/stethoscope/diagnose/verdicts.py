"""Run-level verdicts: what the whole run amounts to, beyond what happened at a step.

* `underfitting` (warning): the loss stayed flat and high from the start (the streaming plateau
  opened at the first logged step and lasted to the last, or the whole curve classifies as
  `plateau_high`). A plateau that a restart ended (an aborted first launch, the next one appended to
  the same log and learning) is that launch's, not the run's. The plateau becomes the verdict's symptom: one incident, not two warnings.
  A short curve (fewer than `_SHORT_POINTS` records) whose loss still fell beyond its noise (`_BEYOND_NOISE` sigma:
  a 125-step LoRA fine-tune 3.19 -> 2.95) is too short to call not learning: info. When every optimizer step was
  skipped (a `loss_scale_collapse` at warning from the run's start), that is the verdict's cause, not the LR.
* `healthy` (info): nothing at warning or above, said with the run's own numbers.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from stethoscope.diagnose.curves import HEALTHY_CURVE, UNDERFITTING_CURVE
from stethoscope.findings.catalogue import (CRASH, DIVERGENCE, EVAL_BROKEN, HEALTHY, LOSS_SCALE_COLLAPSE, PLATEAU,
                                            UNDERFITTING)
from stethoscope.records import Finding, severity_rank

_START_RECORDS = 2  # a plateau that opens within this many logged steps of the first one starts "from the start"
_LEARNED = 0.5  # a run whose loss fell below this share of its first losses learned, whatever a session shows
_SHORT_POINTS = 20  # a curve of fewer records is too short to tell a slow start from no learning ...
_BEYOND_NOISE = 3.0  # ... once its loss fell by more than this many times its record-to-record noise
_CHANCE_K, _CHANCE_REL = 10, 0.003  # a loss stuck at chance is ln(K) to 3-4 digits; ln's spacing is >= 4% to K=10,
# so a flat loss at no chance level lands this close to one by luck rarely (<= 1 in 7 near K=10, 1 in 30 near K=3)


def underfitting(findings: list[Finding], loss_steps: np.ndarray, loss: np.ndarray,
                 classification: dict[str, Any]) -> list[Finding]:
    """An `underfitting` verdict owning the plateau that held from the first step (in place: the plateau
    is withdrawn from `findings`); nothing when the run learned: a curve classified flat on the last session
    of a log whose earlier sessions fell by half (a short resume at its end) is that session's, not the run's."""
    if loss_steps.size < 3:
        return []
    said = next((f for f in findings if f.type == UNDERFITTING and severity_rank(f.severity) >= 1), None)
    if said is not None:  # a detector's own verdict (a classifier at chance level) says it better: it is the one
        said.evidence = {**said.evidence, "verdict": True}
        return []
    finite = loss[np.isfinite(loss)]
    if finite.size >= 3 and finite.min() < _LEARNED * float(np.median(finite[:3])):
        return []
    first, last = int(loss_steps[0]), int(loss_steps[-1])
    gap = int(np.median(np.diff(loss_steps))) if loss_steps.size > 1 else 1
    plateau = next((f for f in findings if f.type == PLATEAU and f.step is not None and not f.evidence.get("lr_zero")
                    and f.step <= first + _START_RECORDS * gap and f.severity != "info"
                    and (f.end_step is None or f.end_step >= last - _START_RECORDS * gap)), None)
    train = classification.get("train") or {}
    if plateau is None and train.get("label") != "plateau_high":
        return []
    if plateau is not None:
        ev = dict(plateau.evidence)
        start, level = ev.get("start_level"), ev.get("level")
        what = f"{start:.4g} -> {level:.4g} over {last - first} steps" if _num(start) and _num(level) else ""
        findings.remove(plateau)
        symptoms = [{"type": PLATEAU, "step": plateau.step}]
        step = plateau.step
    else:
        ev = dict(train.get("evidence") or {})
        what = str(train.get("detail", ""))
        symptoms, step = [], first
    if plateau is None and _short_but_falling(ev):
        msg = (f"the loss fell only {ev['start']:.4g} -> {ev['end']:.4g}, but that is "
               f"{(ev['start'] - ev['end']) / ev['noise']:.1f}x its record-to-record noise over only {ev['points']} "
               "records: too short a curve to call not learning (a short fine-tune's loss falls little)")
        return [Finding(UNDERFITTING, "info", step, msg, end_step=last, evidence={**ev, "short_run": True},
                        source="verdicts")]
    msg = f"the loss never came down from where it started ({what}); the model is not learning"
    if ev.get("ln_vocab") and _num(ev.get("level")):
        msg += f"; it sits at {ev['level'] / ev['ln_vocab']:.0%} of ln(vocab), a uniform guess"
    k = None if ev.get("ln_vocab") else _chance_k(ev)
    if k is not None:
        msg += (f"; it sits at ln({k}) = {math.log(k):.4g} the whole run: chance level if the task has {k} classes "
                f"(the cross-entropy of a uniform guess)" + (" (or a GAN at equilibrium: 2 ln 2 for D, ln 2 for G)"
                                                     if k in (2, 4) else ""))
        ev["chance_classes"] = k
    f = Finding(UNDERFITTING, "warning", step, msg, end_step=last, evidence={**ev, "verdict": True},
                source="verdicts", symptoms=symptoms)
    if plateau is not None:
        f.causes = list(plateau.causes)
    skipped = _skipped_from_start(findings, first, last, gap)
    if skipped is not None:
        f.message += (f"; because every optimizer step was skipped from step {skipped.step} "
                      f"({LOSS_SCALE_COLLAPSE}): no update reached the weights")
        f.causes = [f"every optimizer step was skipped from step {skipped.step} (fp16 loss scaler overflow, "
                    f"{LOSS_SCALE_COLLAPSE}): the weights never changed"]
        f.fixes = ["fix the fp16 overflow first (see the loss_scale_collapse finding): train in bf16, or find the "
                   "layer that overflows; the LR and the model size are not the cause"]
        f.evidence["cause"] = LOSS_SCALE_COLLAPSE
    return [f]


def _chance_k(ev: dict[str, Any]) -> int | None:
    """The one K in 2..`_CHANCE_K` whose ln(K) the loss's start, end and best all lie within `_CHANCE_REL` of."""
    vals = [ev.get(k) for k in ("start", "end", "best", "start_level", "level") if _num(ev.get(k))]
    if len(vals) < 2:
        return None
    ks = [k for k in range(2, _CHANCE_K + 1) if all(abs(v - math.log(k)) <= _CHANCE_REL * math.log(k) for v in vals)]
    return ks[0] if len(ks) == 1 else None


def _short_but_falling(ev: dict[str, Any]) -> bool:
    """A curve of fewer than `_SHORT_POINTS` records whose end lies `_BEYOND_NOISE` noise below its start."""
    start, end, noise, points = ev.get("start"), ev.get("end"), ev.get("noise"), ev.get("points")
    if not (_num(start) and _num(end) and _num(noise) and isinstance(points, int)) or noise <= 0:
        return False
    return points < _SHORT_POINTS and start - end > _BEYOND_NOISE * noise


def _skipped_from_start(findings: list[Finding], first: int, last: int, gap: int) -> Finding | None:
    """A `loss_scale_collapse` at warning or above that began within a few records of the run's start."""
    return next((f for f in findings if f.type == LOSS_SCALE_COLLAPSE and severity_rank(f.severity) >= 1
                 and f.step is not None and f.step <= first + _START_RECORDS * gap), None)


def healthy(findings: list[Finding], series: dict[str, tuple[np.ndarray, np.ndarray]],
            too_short: str | None = None) -> Finding | None:
    """A clean bill of health with the run's numbers, when nothing at warning or above was found; for a curve too
    short to classify (`too_short`: why, from `curves`) an info that says so instead, never "healthy" (5 steps whose
    loss rose). The loss is quoted as logged (its first and last record) and, over 10 records or more, as the
    median of the first and last tenth (at most 10 records each): what the run went from and to, beside its noise."""
    if any(severity_rank(f.severity) >= 1 for f in findings):
        return None
    steps, loss = series.get("loss", (np.zeros(0), np.zeros(0)))
    ok = np.isfinite(loss)
    if not np.count_nonzero(ok) or (too_short is None and np.count_nonzero(ok) < 3):
        return None
    steps, loss = steps[ok], loss[ok]
    span = int(steps[-1] - steps[0])
    if too_short is not None:
        ev = {"too_short": True, "steps": span, "loss_first": float(loss[0]), "loss_last": float(loss[-1])}
        what = (f"loss {loss[0]:.4g} -> {loss[-1]:.4g} over {span} step{'s' * (span != 1)}" if loss.size > 1
                else f"loss {loss[0]:.4g} at step {int(steps[0])}")
        return Finding(HEALTHY, "info", int(steps[-1]), f"too short to judge: {what} ({too_short}); nothing at "
                       "warning level", evidence=ev, source="verdicts")
    k = max(1, min(10, loss.size // 10))
    start, end = float(np.median(loss[:k])), float(np.median(loss[-k:]))
    ev: dict[str, Any] = {"verdict": True, "steps": span, "loss_first": float(loss[0]), "loss_last": float(loss[-1]),
                          "loss_start": start, "loss_end": end, "loss_min": float(loss.min()),
                          "loss_min_step": int(steps[int(np.argmin(loss))])}
    quoted = f"loss {loss[0]:.4g} -> {loss[-1]:.4g}"
    if k > 1:
        quoted += f" (median of the first and last {k} records: {start:.4g} -> {end:.4g})"
    parts = [f"{quoted} over {span} steps (best {ev['loss_min']:.4g} at step {ev['loss_min_step']})"]
    es, ev_loss = series.get("eval", (np.zeros(0), np.zeros(0)))
    fin = np.isfinite(ev_loss)
    if np.count_nonzero(fin):
        i = int(np.argmin(np.where(fin, ev_loss, np.inf)))
        ev.update(eval_best=float(ev_loss[i]), eval_best_step=int(es[i]), eval_last=float(ev_loss[fin][-1]))
        parts.append(f"eval loss best {ev['eval_best']:.4g} at step {ev['eval_best_step']}")
    gs, gn = series.get("grad_norm", (np.zeros(0), np.zeros(0)))
    gn = gn[np.isfinite(gn)]
    if gn.size:
        ev.update(grad_norm_median=float(np.median(gn)), grad_norm_max=float(gn.max()))
        parts.append(f"grad norm median {ev['grad_norm_median']:.3g} (max {ev['grad_norm_max']:.3g})")
    msg = "; ".join(parts) + "; no instability, stall or leak at warning level"
    return Finding(HEALTHY, "info", int(steps[-1]), msg, evidence=ev, source="verdicts")


def _crash(findings: list[Finding]) -> str | None:
    """"crashed at step N: <what>" for a run whose findings hold the crash it ended with (an exception in its status
    or a traceback in its log, at error or above); None otherwise."""
    crash = next((f for f in findings if f.type == CRASH and severity_rank(f.severity) >= 2), None)
    if crash is None:
        return None
    what = crash.message.removeprefix("the run ended with an exception: ").split("; ")[0]
    what = what if len(what) <= 80 else what[:77] + "..."
    return f"crashed at step {crash.step}: {what}" if crash.step is not None else f"crashed: {what}"


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


_PROBLEM_CURVES = frozenset({"explosion", "divergence", "cliff", "overfitting", "plateau_high", "sawtooth"})


def run_label(findings: list[Finding], classification: dict[str, Any]) -> str:
    """The one word for the run that the header prints, agreeing with the verdict below it: the curve's
    `underfitting` (still falling at the end: train longer) reads "still improving" unless the underfitting
    verdict (not learning) was given; a healthy verdict names the run healthy, with the curve's shape; a curve
    too short to classify gives way to the worst finding at warning or above."""
    crash = _crash(findings)
    if crash is not None:  # a run that ended in a crash is named by it, never by its curve ("converged")
        return crash
    curve = str(classification.get("label") or "-")
    verdict = next((f.type for f in findings if f.evidence.get("verdict") and f.type in (UNDERFITTING, HEALTHY)), None)
    if verdict == UNDERFITTING:
        skipped = any(f.evidence.get("cause") == LOSS_SCALE_COLLAPSE for f in findings if f.type == UNDERFITTING)
        return "underfitting (not learning)" + (": every optimizer step skipped" if skipped else "")
    shape = "still improving" if curve == UNDERFITTING_CURVE else curve
    if curve == "overfitting" and any(f.type == EVAL_BROKEN and severity_rank(f.severity) >= 1 for f in findings):
        shape = "eval broken"  # its eval loss rising is the broken eval's (`degenerate.stuck_evals`), not overfitting
    terms = [str(f.evidence["series"]) for f in findings if f.type == DIVERGENCE and f.source == "verdicts"
             and "series" in f.evidence and severity_rank(f.severity) >= 1]  # `components.exploded_terms`
    if terms:
        shape += f" ({', '.join(terms)} diverged)"  # the headline loss did well; a term of it did not
    worst = max(findings, key=lambda f: severity_rank(f.severity), default=None)
    if curve == "too_short" and worst is not None and severity_rank(worst.severity) >= 1:
        return f"{worst.type} (curve: too short to classify)"  # a hang or a crash in a few steps is still a hang
    if verdict != HEALTHY:
        return shape
    if curve in (HEALTHY_CURVE, "-", "too_short"):
        return "healthy"
    return f"healthy (curve: {shape})" if curve in _PROBLEM_CURVES else f"healthy, {shape}"
