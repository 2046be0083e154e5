"""The checks a guided workflow runs, in order: the batch, the gradients, the LR schedule (in
`debug/schedule.py`), the numerics.

Each runs a real check on the model, optimizer and batch it is given and returns a `Step`: what it
ran, what it found, whether that is the problem, and what to check next. A check that lacks its input
says which argument to pass, and is marked skipped.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from stethoscope import records as R
from stethoscope.debug.examples import example_losses, example_scales, masked_rows
from stethoscope.debug.forward import (
    autocast_to,
    call_model,
    loss_of,
    model_inputs,
    side_effects_undone,
)
from stethoscope.debug.grads import gradients
from stethoscope.debug.history import History
from stethoscope.debug.nonfinite import locate_nonfinite
from stethoscope.debug.numeric import numerics
from stethoscope.findings.catalogue import DIVERGENCE, NAN

STATUSES = ("problem", "note", "ok", "skipped")
STAGES = ("inputs", "schedule", "parameters", "forward", "loss", "backward")
"""Where a problem sits in the chain that makes a step's numbers, upstream first: the batch, the LR that made
the last updates, the weights those updates left, the forward, the loss, the backward. A problem upstream
explains those downstream (a NaN weight makes NaN gradients in every layer the backward passes through it),
so a workflow's cause is the problem furthest upstream, whatever order the checks ran in."""


@dataclass
class Thresholds:
    """When a workflow step calls what it measured a problem."""

    batch_ratio: float = 2.0
    """The batch's loss at least this many times the reference (other batches, or the run's level)."""
    example_ratio: float = 5.0
    """One example's loss at least this many times the 90th percentile of the other examples' (this batch's
    and the reference batches'), or its input scale or length this many times the median example's."""
    grad_ratio: float = 10.0
    """The gradient norm on the batch at least this many times the run's median before the finding."""
    adam_lr: float = 1e-2
    """An Adam-family LR above this is high for any model size."""
    sgd_lr: float = 1.0
    max_examples: int = 64
    """Examples of the batch run one by one for per-example losses."""
    lr_within: int = 50
    """Steps before the finding in which an LR jump or the end of warm-up counts."""

    def __post_init__(self) -> None:
        for name in ("batch_ratio", "example_ratio", "grad_ratio", "adam_lr", "sgd_lr"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.max_examples < 1 or self.lr_within < 1:
            raise ValueError("max_examples and lr_within must be >= 1")


@dataclass
class Step:
    """One check of a workflow."""

    title: str
    call: str
    """The Python call it made (to repeat it by hand)."""
    status: str
    found: str
    next: str
    data: dict[str, Any] = field(default_factory=dict)
    stage: str = ""
    """Where in the causal chain (`STAGES`) the problem it found sits; "" when it found none."""


def skipped(title: str, call: str, missing: str) -> Step:
    return Step(title, call, "skipped", f"not run: {missing}", f"pass {missing} in the context to run it")


# -- 1. the batch ----------------------------------------------------------------------------------

def check_batch(kind: str, ctx: Any, finding: Any, hist: History, th: Thresholds) -> Step:
    title, call = "check the batch", "stethoscope.debug.locate_nonfinite(model, batch)"
    if ctx.batch is None:
        return skipped(title, call, "batch= (the batch of the finding's step)")
    name = _batch_name(finding, hist)
    masked = masked_rows(ctx.batch)
    if kind == NAN:
        return _batch_nan(ctx, name, masked, th)
    return _batch_spike(kind, ctx, finding, hist, name, masked, th)


def _batch_nan(ctx: Any, name: str, masked: Any, th: Thresholds) -> Step:
    rep = locate_nonfinite(ctx.model, ctx.batch, ctx.loss_fn, forward=ctx.forward, autocast=ctx.autocast,
                           loss_scale=ctx.loss_scale)
    data: dict[str, Any] = {"locate": rep.to_dict()}
    bad = []
    if rep.found and not rep.params_nonfinite:
        losses = example_losses(ctx.model, ctx.batch, ctx.loss_fn, ctx.forward, ctx.autocast, th.max_examples)
        if losses:
            bad = [i for i, v in enumerate(losses) if not math.isfinite(v)]
            data["example_losses"] = losses
    some_examples = bool(bad) and len(bad) < len(data.get("example_losses", []))
    found = f"{name}: {rep.verdict}"
    if some_examples:
        found += f"; the loss is NaN/Inf on example(s) {_ids(bad, name, hist_ids=ctx.batch_ids)} only"
    if masked and masked[0] and masked[0] != list(range(masked[1])):
        found += f"; {len(masked[0])} of {masked[1]} examples have every label masked (-100)"
    stage = "inputs" if some_examples else nonfinite_stage(rep)
    nxt = rep.next_check if rep.found else "the batch is clean: go on to the gradients"
    if some_examples and not rep.inputs_nonfinite and not rep.all_masked:
        nxt = f"inspect those examples of {name} (their labels and lengths) and skip them on resume"
    return Step("check the batch", "stethoscope.debug.locate_nonfinite(model, batch)",
                "problem" if stage else "ok", found, nxt, data, stage)


def nonfinite_stage(rep: Any) -> str:
    """Where a `locate_nonfinite` report places the first NaN/Inf, as a `STAGES` entry ("" if nowhere)."""
    if rep.inputs_nonfinite or rep.all_masked:
        return "inputs"  # the data, or labels that leave the loss nothing to average
    if rep.params_nonfinite:
        return "parameters"
    if rep.first_output is not None:
        return "forward"
    if rep.loss_nonfinite:
        return "loss"
    return "backward" if rep.first_grad is not None else ""


def _batch_spike(kind: str, ctx: Any, finding: Any, hist: History, name: str, masked: Any, th: Thresholds) -> Step:
    call = "per-example losses of batch vs reference_batches / the run's loss level"
    losses = example_losses(ctx.model, ctx.batch, ctx.loss_fn, ctx.forward, ctx.autocast, th.max_examples)
    now = _loss(ctx, ctx.batch)
    refs = [_loss(ctx, b) for b in ctx.reference_batches]
    level = _level(finding, hist, "level_before" if kind == DIVERGENCE else "level")
    data: dict[str, Any] = {"loss": now, "reference_losses": refs, "run_level": level, "example_losses": losses}
    parts = [f"loss on {name}: {fmt(now)}"]
    finite_refs = [r for r in refs if math.isfinite(r)]
    ref_med = statistics.median(finite_refs) if finite_refs else None
    vs_ref = now / ref_med if ref_med else None
    vs_level = now / level if level else None
    if ref_med is not None:
        parts.append(f"{fmt(ref_med)} on {len(refs)} other batch(es) (x{vs_ref:.3g})")
    if level is not None:
        parts.append(f"the run's level before the finding {fmt(level)} (x{vs_level:.3g})")
    pool = [v for b in ctx.reference_batches
            for v in example_losses(ctx.model, b, ctx.loss_fn, ctx.forward, ctx.autocast, th.max_examples) or []
            if math.isfinite(v)]
    worst = _worst_example(losses, pool, th)
    if worst is not None:
        i, ref, what = worst
        parts.append(f"example {_ids([i], name, ctx.batch_ids)} has loss {fmt(losses[i])}, x{losses[i] / ref:.3g} "
                     f"{what} {fmt(ref)}")
        worst = i
    whole = False
    for i, text, decisive in _odd_inputs(ctx, name, th):
        parts.append(text)
        whole = whole or (decisive and i is None)
        if decisive and worst is None and i is not None:
            worst = i
    if masked and masked[0]:
        parts.append(f"{len(masked[0])} of {masked[1]} examples have every label masked (-100)")
    outlier = vs_ref is not None and vs_ref >= th.batch_ratio
    if vs_ref is None and vs_level is not None:
        outlier = vs_level >= th.batch_ratio
    if kind == DIVERGENCE and ref_med is not None and level and ref_med >= th.batch_ratio * level:
        parts.append("the other batches are as high: the model degraded, not this batch")
        outlier = False
    if outlier and worst is None and not whole:
        parts.append(_spread(losses, pool))
    problem = outlier or worst is not None or whole
    found = "; ".join(p for p in parts if p)
    if problem:
        short = _batch_name(finding, History())
        who = f"example {_ids([worst], name, ctx.batch_ids)} of {short}" if worst is not None else name
        found = f"the batch is the outlier: {found}"
        nxt = f"inspect {who} (length, labels, encoding, duplicates); skip it on resume or fix the data pipeline"
        if worst is None:
            nxt = (f"inspect {name} as a whole (its source shard, a preprocessing or scaling step applied to it, "
                   "its collation); skip it on resume or fix the data pipeline")
    elif not refs and level is None:
        nxt = "give reference_batches= (a few other batches) or run= to compare this batch's loss against"
    else:
        nxt = "the batch looks ordinary: go on to the gradients"
    return Step("check the batch", call, "problem" if problem else "ok", found, nxt, data, "inputs" if problem else "")


def _worst_example(losses: list[float] | None, pool: list[float], th: Thresholds) -> tuple[int, float, str] | None:
    """The example whose loss is `example_ratio` times the 90th percentile of every other example (this
    batch's and the reference batches', `pool`): per-example losses are heavy-tailed, a median of all would cry wolf. In a batch whose median example is that far above the
    reference examples' it must also exceed every other example of its batch: the batch is the outlier."""
    finite = [v for v in losses or [] if math.isfinite(v)]
    if len(finite) < 2:
        return None
    i = max(range(len(losses)), key=lambda k: losses[k] if math.isfinite(losses[k]) else -math.inf)
    mine = [v for k, v in enumerate(losses) if k != i and math.isfinite(v)]
    others = sorted(mine + pool)
    if len(others) < 4:
        return None
    ref, what = others[min(len(others) - 1, int(0.9 * len(others)))], "the 90th percentile of the other examples'"
    if len(pool) >= 4 and mine and statistics.median(mine) >= th.example_ratio * statistics.median(pool):
        ref, what = max(ref, max(mine)), "the largest other example's in a batch high throughout"
    if ref <= 0 or losses[i] < th.example_ratio * ref:
        return None
    return i, ref, what


def _spread(losses: list[float] | None, pool: list[float]) -> str:
    """How many of the batch's examples sit above the reference examples' 90th percentile: most of them, and
    the batch as a whole is off (a bad shard, a scaling bug), not one sample."""
    finite = [v for v in losses or [] if math.isfinite(v)]
    if len(pool) < 4 or not finite:
        return ""
    p90 = sorted(pool)[int(0.9 * (len(pool) - 1))]
    high = sum(v > p90 for v in finite)
    return (f"{high} of {len(finite)} examples' losses are above the other batches' 90th percentile {fmt(p90)}"
            + (": the batch as a whole, not one example" if 2 * high > len(finite) else ""))


def _odd_inputs(ctx: Any, name: str, th: Thresholds) -> list[tuple[int | None, str, bool]]:
    """Examples whose inputs are far larger (RMS: decisive, a corrupted sample) or longer (a note: lengths
    vary) than the median example of this batch and of the reference batches; independent of the weights,
    which may have moved since the finding. When the batch's own median example is that far above the
    reference batches', the batch as a whole is the outlier (index None) and an example is singled out only
    if it also stands out from its own batch. (index, what, decisive) each."""
    scales = example_scales(ctx.batch)
    if not scales:
        return []
    refs = [example_scales(b) or {} for b in ctx.reference_batches]
    out: list[tuple[int | None, str, bool]] = []
    for key, what in (("rms", "inputs' scale (RMS)"), ("length", "length")):
        mine = scales.get(key)
        if not mine:
            continue
        theirs = [v for r in refs for v in r.get(key, [])]
        own = statistics.median(mine)
        if theirs and statistics.median(theirs) > 0 and own >= th.example_ratio * statistics.median(theirs):
            ref = statistics.median(theirs)
            high = sum(v >= th.example_ratio * ref for v in mine)
            out.append((None, f"the batch as a whole: {high} of {len(mine)} examples' {what} is at least "
                              f"x{th.example_ratio:g} the other batches' median example's {fmt(ref)} (this batch's "
                              f"median example {fmt(own)}, x{own / ref:.3g})", key == "rms"))
        med = max(statistics.median(mine + theirs), own)
        i = max(range(len(mine)), key=lambda k: mine[k])
        if med > 0 and mine[i] >= th.example_ratio * med:
            out.append((i, f"example {_ids([i], name, ctx.batch_ids)}: its {what} {fmt(mine[i])} is "
                           f"x{mine[i] / med:.3g} the median example's {fmt(med)}", key == "rms"))
    return out


def _loss(ctx: Any, batch: Any) -> float:
    import torch

    with torch.no_grad(), autocast_to(ctx.model, ctx.autocast):
        loss = loss_of(call_model(ctx.model, batch, ctx.forward, ctx.loss_fn), batch, ctx.loss_fn)
    return float(loss.detach().float()) if isinstance(loss, torch.Tensor) else math.nan  # host sync: one per batch


def _level(finding: Any, hist: History, key: str) -> float | None:
    ev = getattr(finding, "evidence", None) or {}
    v = ev.get(key)
    if isinstance(v, (int, float)) and math.isfinite(v) and v > 0:
        return float(v)
    step = getattr(finding, "step", None)
    return hist.level_before(R.LOSS, step) if step is not None else None


def _batch_name(finding: Any, hist: History) -> str:
    step = getattr(finding, "step", None)
    if step is None:
        return "the batch"
    ids = hist.batch_ids.get(step)
    if ids:
        shown = ", ".join(map(str, ids[:8])) + (", …" if len(ids) > 8 else "")
        return f"the batch of step {step} (samples {shown})"
    return f"the batch of step {step}"


def _ids(idx: list[int], name: str, hist_ids: list[Any] | None) -> str:
    """Example positions, with their sample ids when the store holds the batch's ids."""
    if hist_ids and len(hist_ids) > max(idx):
        return ", ".join(f"{i} (sample {hist_ids[i]})" for i in idx[:8])
    return ", ".join(map(str, idx[:8]))


# -- 2. the gradients ------------------------------------------------------------------------------

def check_gradients(kind: str, ctx: Any, finding: Any, hist: History, th: Thresholds) -> Step:
    title, call = "check the gradients", "loss.backward(); stethoscope.debug.gradients(model)"
    if ctx.batch is None:
        return skipped(title, call, "batch=")
    import torch

    with side_effects_undone(ctx.model), torch.enable_grad():
        with autocast_to(ctx.model, ctx.autocast):
            out = call_model(ctx.model, ctx.batch, ctx.forward, ctx.loss_fn)
            loss = loss_of(out, ctx.batch, ctx.loss_fn)
        if loss is None or not loss.requires_grad:
            return Step(title, call, "skipped", "not run: the loss has no gradient (no parameter requires one)",
                        "check requires_grad on the parameters")
        (loss * ctx.loss_scale if ctx.loss_scale else loss).backward()
        rep = gradients(ctx.model, ctx.gradient_config)
    if ctx.loss_scale:
        rep.total_norm /= ctx.loss_scale
    step = getattr(finding, "step", None)
    level = hist.level_before(R.GRAD_NORM, step) if step is not None else None
    parts = [f"total gradient norm {fmt(rep.total_norm)} on this batch"]
    ratio = rep.total_norm / level if level else None
    if ratio is not None:
        parts.append(f"x{ratio:.3g} the run's median {fmt(level)} before step {step}")
    for flag in ("nonfinite", "exploding", "vanishing", "zero", "dead_units"):
        layers = rep.flagged(flag)
        if layers:
            parts.append(f"{flag.replace('_', ' ')}: {', '.join(ly.name for ly in layers[:5])}"
                         + (f" (+{len(layers) - 5})" if len(layers) > 5 else ""))
    bad = rep.flagged("nonfinite") + rep.flagged("exploding")
    problem = bool(bad) or (ratio is not None and (not math.isfinite(ratio) or ratio >= th.grad_ratio))
    status = "problem" if problem else ("note" if rep.flagged() else "ok")
    if rep.flagged("nonfinite"):  # a NaN spreads backward from where it is born: every layer before it reads NaN
        nxt = (f"the non-finite layer nearest the loss is '{rep.flagged('nonfinite')[-1].name}' (the others may only "
               "pass its NaN back): locate_nonfinite(model, batch) says where the NaN is born; skip non-finite steps "
               "(GradScaler) or clip")
    elif problem:
        top = bad[0].name if bad else max(rep.layers, key=lambda ly: ly.norm).name
        nxt = (f"the largest gradient is in '{top}': clip (clip_grad_norm_ to ~1.0), lower the LR, and check that "
               "layer's input scale; then the LR schedule")
    elif rep.flagged():
        nxt = "zero/vanishing/dead layers slow learning but do not spike it: note them, go on to the LR schedule"
    else:
        nxt = "the gradients are ordinary on this batch: go on to the LR schedule"
    return Step(title, call, status, "; ".join(parts), nxt, {"gradients": rep.to_dict()}, "backward" if problem else "")


# -- 4. the numerics (3, the LR schedule: debug/schedule.py) -------------------------------------------------------------------------------

def check_numerics(kind: str, ctx: Any, finding: Any, hist: History, th: Thresholds) -> Step:
    title, call = "check the numerics", "stethoscope.debug.numerics(model, batch)"
    if ctx.batch is None:
        return skipped(title, call, "batch=")
    sample = ctx.batch if ctx.forward is not None else model_inputs(ctx.batch, ctx.loss_fn)
    rep = numerics(ctx.model, sample, ctx.numerics_config, forward=ctx.forward, autocast=ctx.autocast)
    serious = [i for i in rep.issues if i.severity in ("error", "critical")]
    shown = (serious or rep.issues)[:4]
    found = "; ".join(f"{i.where} {i.name}: {i.message}" for i in shown) or \
        "parameters and activations finite, none saturated, norm eps safe for the dtype"
    if len(rep.issues) > len(shown):
        found += f" (+{len(rep.issues) - len(shown)} more)"
    if serious:
        nxt = "fix the first of these (eps >= 1e-6 for half precision, bf16 instead of fp16, re-initialise or " \
              "roll back broken weights); then rerun the batch with locate_nonfinite"
    elif rep.issues:
        nxt = "these are risks, not the trigger: keep an eye on them"
    else:
        nxt = "nothing numerical stands out: compare a checkpoint from before the finding on the same batch"
    status = "problem" if serious else ("note" if rep.issues else "ok")
    stage = ("parameters" if any(i.where == "parameter" for i in serious) else "forward") if serious else ""
    return Step(title, call, status, found, nxt, {"numerics": rep.to_dict()}, stage)


def fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"
