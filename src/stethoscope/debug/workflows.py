"""Guided workflows for a loss spike, a divergence and a NaN: check the batch, then the gradients, then
the LR schedule, then the numerics, each step run on the given model, optimizer and batch.

`workflow(finding, context)` takes a finding (a `stethoscope.Finding`, its dict, or just its type)
and the things to check; it returns a `Workflow` whose steps say what each check found and what to
check next, and whose `cause` is the problem furthest upstream (inputs, LR schedule, parameters, forward, loss, backward).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stethoscope.debug.forward import side_effects_undone
from stethoscope.debug.grads import GradientConfig
from stethoscope.debug.history import read_history
from stethoscope.debug.numeric import NumericsConfig
from stethoscope.debug.schedule import check_lr
from stethoscope.debug.steps import (
    STAGES,
    Step,
    Thresholds,
    check_batch,
    check_gradients,
    check_numerics,
)
from stethoscope.findings.catalogue import DIVERGENCE, GRAD_EXPLOSION, GRAD_SPIKE, LOSS_SCALE_COLLAPSE, LOSS_SPIKE, NAN
from stethoscope.records import Finding, json_safe

# Finding types → the workflow that answers them.
KINDS = {NAN: NAN, LOSS_SPIKE: LOSS_SPIKE, GRAD_SPIKE: LOSS_SPIKE, GRAD_EXPLOSION: LOSS_SPIKE,
         DIVERGENCE: DIVERGENCE, LOSS_SCALE_COLLAPSE: NAN}
_TITLES = {NAN: "NaN/Inf", LOSS_SPIKE: "loss spike", DIVERGENCE: "divergence"}
CHECKS = (check_batch, check_gradients, check_lr, check_numerics)
PLAN = (  # (title, what it checks, what it needs): what `stethoscope debug RUN` prints without running it
    ("check the batch", "its loss vs other batches and the run's level; per-example losses, input scale and "
     "length; labels all masked; NaN/Inf in the inputs and where the first one is born (locate_nonfinite)",
     "batch, loss_fn; reference_batches or run"),
    ("check the gradients", "per-layer gradient norms on the batch: non-finite, exploding, vanishing and zero "
     "layers, dead units; the total vs the run's grad norm before the step", "batch; run"),
    ("check the LR schedule", "the LR at the step: jumps, end of warm-up, restarts on resume; the LR vs the "
     "optimizer family; scheduler vs optimizer; Adam's update/weight ratio", "optimizer, scheduler or run"),
    ("check the numerics", "non-finite or extreme parameters; non-finite, saturated or near-overflow "
     "activations; norm eps for the dtype", "batch"),
)


@dataclass
class WorkflowContext:
    """What a workflow checks. Only `model` is required; each step says which missing field it needs."""

    model: Any
    batch: Any = None
    """The batch of the finding's step (re-fetched from the data loader), passed as `locate_nonfinite` says."""
    optimizer: Any = None
    loss_fn: Any = None
    forward: Any = None
    scheduler: Any = None
    run: Any = None
    """The run's directory (or an open RunReader): loss, grad norm and LR history, the batch's sample ids."""
    reference_batches: list[Any] = field(default_factory=list)
    """A few other batches: the loss on them is the yardstick for the batch's."""
    autocast: Any = None
    loss_scale: float | None = None
    batch_ids: list[Any] | None = None
    """The batch's sample ids (default: those the run's store holds for the finding's step)."""
    thresholds: Thresholds = field(default_factory=Thresholds)
    gradient_config: GradientConfig | None = None
    numerics_config: NumericsConfig | None = None


@dataclass
class Workflow:
    """The steps run for one finding, in order; `str()` reads them out."""

    kind: str
    step: int | None
    message: str
    steps: list[Step]

    @property
    def cause(self) -> Step | None:
        """The problem furthest upstream in the causal chain (`STAGES`: inputs, LR schedule, parameters,
        forward, loss, backward), whichever check found it; the others it explains are its evidence."""
        problems = [s for s in self.steps if s.status == "problem"]
        return min(problems, key=_upstream, default=None)

    @property
    def conclusion(self) -> str:
        c = self.cause
        if c is None:
            return "no step found the trigger: " + (self.steps[-1].next if self.steps else "")
        text = f"{c.title}" + (f" (the {c.stage})" if c.stage else "") + f": {c.found}. Next: {c.next}"
        after = [s for s in self.steps if s.status == "problem" and _upstream(s) > _upstream(c)]
        if after:
            text += ". Downstream of it, so evidence, not causes: " + ", ".join(f"{s.title} (the {s.stage})" for s in after)
        return text

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["conclusion"] = self.conclusion
        return json_safe(d)

    def __str__(self) -> str:
        at = f" at step {self.step}" if self.step is not None else ""
        lines = [f"{_TITLES[self.kind]} workflow{at}" + (f": {self.message}" if self.message else "")]
        for i, s in enumerate(self.steps, 1):
            lines += [f"{i}. {s.title} [{s.status}]  ({s.call})", f"   found: {s.found}", f"   next:  {s.next}"]
        lines.append(f"=> {self.conclusion}")
        return "\n".join(lines)


def _upstream(step: Step) -> int:
    return STAGES.index(step.stage) if step.stage in STAGES else len(STAGES)


def workflow(finding: Any, context: WorkflowContext | Mapping[str, Any]) -> Workflow:
    """Run the guided workflow for `finding` (nan, loss_spike/grad_spike/grad_explosion, divergence) on
    `context` (a WorkflowContext, or a mapping of its fields)."""
    f = finding_of(finding)
    kind = KINDS.get(f.type)
    if kind is None:
        raise ValueError(f"no workflow for a {f.type!r} finding; workflows exist for {', '.join(sorted(KINDS))}")
    ctx = context if isinstance(context, WorkflowContext) else _context(context)
    hist = read_history(ctx.run, (f.step,) if f.step is not None else ())
    if ctx.batch_ids is None and f.step is not None:
        ctx = dataclasses.replace(ctx, batch_ids=hist.batch_ids.get(f.step))
    with side_effects_undone(ctx.model):  # the checks' forwards leave no trace on BatchNorm statistics or the RNG
        steps = [check(kind, ctx, f, hist, ctx.thresholds) for check in CHECKS]
    return Workflow(kind, f.step, f.message, steps)


def _context(context: Mapping[str, Any]) -> WorkflowContext:
    known = [f.name for f in dataclasses.fields(WorkflowContext)]
    unknown = sorted(set(context) - set(known))
    if unknown or "model" not in context:
        what = f"unknown key(s) {', '.join(unknown)}" if unknown else "no model"
        raise ValueError(f"workflow context: {what}; expected model and any of {', '.join(known[1:])}")
    return WorkflowContext(**dict(context))


def finding_of(finding: Any) -> Finding:
    """A Finding from a Finding, its dict or just its type."""
    if isinstance(finding, Finding):
        return finding
    if isinstance(finding, str):
        return Finding(finding, "info", None, "")
    if isinstance(finding, Mapping):
        if "type" not in finding:
            raise ValueError(f"a finding needs its 'type' (one of {', '.join(sorted(KINDS))}); got keys {sorted(finding)}")
        d = {"severity": "info", "step": None, "message": "", **finding}
        return Finding.from_dict(d)
    raise ValueError(f"finding must be a Finding, its dict or a finding type, got {type(finding).__name__}")
