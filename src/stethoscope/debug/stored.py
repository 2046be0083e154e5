"""The workflow's checks that a run's store can answer without the model: what `stethoscope debug RUN` runs.

From the store: the loss and grad norm around the finding (which went non-finite first, whether the fault
built up or came in one step, whether it stayed), the batch's sample ids, the report the Monitor stored when
it re-ran a non-finite step's batch (`Monitor(debug_nonfinite=True)`), and the LR history (the same LR
check the live workflow runs). What needs the live model and batch (per-example losses, per-layer
gradients, numerics, the optimizer's state) each step names, with the call that runs it.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from stethoscope import records as R
from stethoscope.debug.history import History, read_history
from stethoscope.debug.schedule import check_lr
from stethoscope.debug.steps import Step, Thresholds, fmt, nonfinite_stage
from stethoscope.debug.workflows import KINDS, Workflow, finding_of
from stethoscope.findings.catalogue import NAN

AFTER = 10
"""Records after the finding that say whether the loss came back (one bad step) or stayed (the model changed)."""
LEAD = 10
"""Records before the finding read for a lead-up (a grad norm growing into it)."""
LIVE = {  # what each check adds with the model and the batch
    "check the batch": "per-example losses, input scales, masked labels; locate_nonfinite(model, batch)",
    "check the gradients": "per-layer gradient norms on the batch: which layer explodes, vanishes or is NaN",
    "check the LR schedule": "the optimizer's and the scheduler's LR, Adam's update/weight ratio",
    "check the numerics": "non-finite or extreme weights, saturated activations, norm eps for the dtype",
}


@dataclass
class _NoModel:
    """What check_lr reads of a workflow context: nothing live."""

    optimizer: Any = None
    scheduler: Any = None


def stored_workflow(finding: Any, run: Any, report: dict[str, Any] | None = None,
                    thresholds: Thresholds | None = None) -> Workflow:
    """Run the checks `run`'s store allows (a run directory or an open RunReader) for `finding`; `report` is
    the locate_nonfinite report the Monitor stored for its step, if any. Steps that need the live model
    say so (status "skipped" when nothing of them could run from the store)."""
    f = finding_of(finding)
    kind = KINDS.get(f.type)
    if kind is None:
        raise ValueError(f"no workflow for a {f.type!r} finding; workflows exist for {', '.join(sorted(KINDS))}")
    th = thresholds or Thresholds()
    hist = read_history(run, (f.step,) if f.step is not None else ())
    lr = check_lr(kind, _NoModel(), f, hist, th) if hist.get(R.LR)[0] else \
        _skipped("check the LR schedule", "from the store: opt/lr", "the store has no LR")
    steps = [_batch(kind, f.step, hist, report, th), _gradients(kind, f.step, hist, th), lr, _numerics(f.step)]
    for s in steps:
        s.data["needs_live_model"] = LIVE[s.title]
    return Workflow(kind, f.step, f.message, steps)


def _batch(kind: str, step: int | None, hist: History, report: dict[str, Any] | None, th: Thresholds) -> Step:
    title, call = "check the batch", "from the store: the batch's sample ids, the loss around the step"
    if step is None:
        return _skipped(title, call, "the finding has no step")
    ids = hist.batch_ids.get(step)
    name = f"the batch of step {step}" + (f" (samples {_shown(ids)})" if ids else "")
    if kind == NAN:
        return _batch_nan(title, call, step, name, hist, report, th)
    steps, losses = hist.get(R.LOSS)
    level = hist.level_before(R.LOSS, step)
    now = hist.at(R.LOSS, step)
    if level is None or now is None:
        return _skipped(title, call, "the store has no loss before the step")
    after = [v for s, v in zip(steps, losses) if s > step and math.isfinite(v)][:AFTER]
    parts = [f"loss on {name}: {fmt(now)}, x{now / level:.3g} the run's median {fmt(level)} before it"]
    nxt = (f"re-fetch {name} and run workflow(...) with the model: per-example losses and input scales say "
           "whether one sample or the whole batch is off")
    if len(after) >= 3:
        back = statistics.median(after) / level
        parts.append(f"the median of the {len(after)} records after it is x{back:.3g} the level")
        if back < th.batch_ratio <= now / level:
            parts.append("the loss came back at once: one batch is the prime suspect, not the model")
        elif back >= th.batch_ratio:
            parts.append("the loss stayed up: the model changed (the LR, an instability), not only one batch")
            nxt = "the batch alone does not explain a loss that stays up: see the gradients and the LR schedule"
    return Step(title, call, "note", "; ".join(parts), nxt, {"loss": now, "level": level, "after": after})


def _batch_nan(title: str, call: str, step: int, name: str, hist: History, report: dict[str, Any] | None,
               th: Thresholds) -> Step:
    first = {n: _first_nonfinite(hist, n, step) for n in (R.LOSS, R.GRAD_NORM)}
    parts, data = [], {"first_nonfinite": first}
    loss_at, norm_at = first[R.LOSS], first[R.GRAD_NORM]
    if loss_at is not None:
        parts.append(f"the loss is non-finite from step {loss_at}")
    if norm_at is not None:
        parts.append(f"the grad norm from step {norm_at}")
    stage, nxt = "", f"re-fetch {name} and run locate_nonfinite(model, batch) on it: where the NaN is born"
    if norm_at is not None and (loss_at is None or norm_at < loss_at):
        parts.append(f"the loss of step {norm_at} was still finite: its backward made the NaN, the forward was clean")
        stage = "backward"
    elif loss_at is not None:
        parts.append(f"the forward of step {loss_at} was already non-finite, before any gradient of that step")
        parts.append(_update_before(hist, loss_at, th))
    stays = _stays(hist, R.LOSS, loss_at if loss_at is not None else norm_at)
    if stays is not None:
        parts.append(stays)
    if report:
        verdict = report.get("verdict") or report.get("message", "")
        parts.insert(0, f"re-run by the Monitor: {verdict}")
        stage = nonfinite_stage(_Report(report)) or stage
        nxt = report.get("next_check") or nxt
        data["stored_report"] = report
    parts = [p for p in parts if p]
    found = f"{name}: " + "; ".join(parts) if parts else f"{name}: no non-finite loss or grad norm in the store"
    return Step(title, call, "problem" if stage else "note", found, nxt, data, stage)


def _gradients(kind: str, step: int | None, hist: History, th: Thresholds) -> Step:
    title, call = "check the gradients", "from the store: grad/norm before and at the step"
    steps, norms = hist.get(R.GRAD_NORM)
    if step is None or not steps:
        return _skipped(title, call, "the store has no grad norm")
    before = [(s, v) for s, v in zip(steps, norms) if s < step]
    base = [v for _, v in before[:-LEAD][-50:] if math.isfinite(v)] or [v for _, v in before if math.isfinite(v)]
    if not base:
        return _skipped(title, call, "the store has no finite grad norm before the step")
    level = statistics.median(base)
    lead = [(s, v) for s, v in before[-LEAD:] if math.isfinite(v)]
    parts, stage = [f"grad norm median {fmt(level)} before the last {LEAD} records"], ""
    top = max(lead, key=lambda sv: sv[1], default=None)
    if top is not None and level > 0 and top[1] >= th.grad_ratio * level:
        parts.append(f"it grew to {fmt(top[1])} (x{top[1] / level:.3g}) at step {top[0]}, before the finding: an "
                     "instability built up over the updates (clip, lower the LR), not one batch")
        stage = "parameters"  # those updates made the weights the finding's step ran with
    elif lead and level > 0:
        s, v = lead[-1]
        parts.append(f"no lead-up in the grad norm: {fmt(v)} at step {s} (x{v / level:.3g})")
    now = hist.at(R.GRAD_NORM, step)
    if now is not None and kind != NAN and level > 0 and math.isfinite(now):
        parts.append(f"{fmt(now)} at step {step} (x{now / level:.3g})")
        if not stage and now >= th.grad_ratio * level:
            stage = "backward"
    nxt = ("clip gradients (clip_grad_norm_ ~1.0) and lower the LR; roll back to before the growth" if stage else
           "run workflow(...) with the model and the batch for the per-layer norms")
    return Step(title, call, "problem" if stage else "ok", "; ".join(parts), nxt, {"level": level, "lead": lead}, stage)


def _numerics(step: int | None) -> Step:
    return Step("check the numerics", "stethoscope.debug.numerics(model, batch)", "skipped",
                "not run: needs the live model (the store holds no weights or activations)",
                f"run workflow(...) with the model and the batch of step {step}")


def _skipped(title: str, call: str, why: str) -> Step:
    return Step(title, call, "skipped", f"not run: {why}", "run workflow(...) with the model and the batch")


def _first_nonfinite(hist: History, name: str, step: int) -> int | None:
    """The first non-finite record of `name` at or after the last finite one before `step`."""
    steps, values = hist.get(name)
    start = max((s for s, v in zip(steps, values) if s < step and math.isfinite(v)), default=None)
    return next((s for s, v in zip(steps, values) if (start is None or s > start) and not math.isfinite(v)), None)


def _update_before(hist: History, step: int, th: Thresholds) -> str:
    """A finite, ordinary update (finite gradients of the usual size times a finite LR) leaves finite weights
    of the usual size: then the NaN entered with the batch, a layer's forward on it, or a write outside the
    optimizer. A finite but huge update leaves weights that overflow: the instability, not the batch."""
    s_norm = max((s for s in hist.get(R.GRAD_NORM)[0] if s < step), default=None)
    norm = hist.at(R.GRAD_NORM, s_norm) if s_norm is not None else None
    lr = hist.at(R.LR, s_norm) if s_norm is not None else None
    if norm is None or not math.isfinite(norm) or (lr is not None and not math.isfinite(lr)):
        return ""
    level = hist.level_before(R.GRAD_NORM, s_norm)
    if level and norm >= th.grad_ratio * level:
        return (f"the update before it was finite but huge (grad norm {fmt(norm)} at step {s_norm}, x{norm / level:.3g} "
                "the run's median): the weights it left overflowed in this forward, an instability, not this batch")
    return (f"the update before it was finite and ordinary (grad norm {fmt(norm)} at step {s_norm}"
            + (f", LR {fmt(lr)}" if lr is not None else "") + f"), so the weights entering step {step} were finite "
            "unless written outside the optimizer (an fp16 overflow in a custom kernel, a buffer, a bad load): "
            f"the batch of step {step} or a layer's forward on it made the NaN")


def _stays(hist: History, name: str, start: int | None) -> str | None:
    if start is None:
        return None
    after = [(s, v) for s, v in zip(*hist.get(name)) if s > start]
    if not after:
        return None
    back = next((s for s, v in after if math.isfinite(v)), None)
    if back is None:
        return (f"non-finite in all {len(after)} records after it: the weights hold NaN/Inf now (one bad batch "
                "makes one bad step; its update spreads the NaN into the weights)")
    return f"finite again at step {back}: a transient (one batch, or a step the loss scaler skipped)"


def _shown(ids: list[Any]) -> str:
    return ", ".join(map(str, ids[:8])) + (", …" if len(ids) > 8 else "")


class _Report:
    """A stored locate_nonfinite report (its to_dict), read as nonfinite_stage reads a NonfiniteReport."""

    def __init__(self, d: dict[str, Any]) -> None:
        self.inputs_nonfinite = d.get("inputs_nonfinite") or []
        self.params_nonfinite = d.get("params_nonfinite") or []
        self.first_output, self.first_grad = d.get("first_output"), d.get("first_grad")
        loss = d.get("loss")
        self.loss_nonfinite = isinstance(loss, str)  # json_safe stores NaN/Inf as "nan"/"inf"
        self.all_masked = self.loss_nonfinite and 0 < (d.get("examples") or 0) == (d.get("masked_examples") or 0)
