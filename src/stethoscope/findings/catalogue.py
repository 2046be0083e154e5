"""Every finding type once: its name, what it means, which charts show it, what it owns and escalates.

This module owns the vocabulary. Each type is a constant (`NAN = "nan"`) the rest of the package imports;
a test counts bare finding-type strings outside `findings/` (tests/findings/test_vocabulary.py). The rows
of `_TYPES` are the one list of types, in wire order: `FINDING_TYPES` (their names) is what a rank sends
as an index (`detect/straggler.py`), so a new type is appended at the end, never inserted or reordered.
Adding a type touches this file (constant + row) and its causes and fixes in `findings/remedies.py`
(a test checks that every problem type has them); `findings/advice.py` applies them. The rows are read by
the incidents and the pipeline (`symptoms`, `escalates`), the alert rules (`run_wide`),
the NaN detector and the hang watchdog (`resolve_steps`), and the report and the dashboard (`charts`,
`every_chart`: a row's charts must be report chart ids, which a test checks).

An incident root (a type with `symptoms`) owns the findings of those types that start while it is open
(until its end step), or up to `lead_steps` (DetectConfig) steps before its onset (the grad norm leads the
loss) unless they were over and recovered before it began: they become its evidence, not findings of their
own (`findings/incidents.py`); a root at info (a harmless blip, an expected jump) owns nothing.
`escalates` names the type a finding replaces at the same step (`findings/pipeline.py`).
"""

from __future__ import annotations

from dataclasses import dataclass


# -- the vocabulary: one constant a type (the code imports these, never the bare string) ------------
NAN = "nan"
LOSS_SPIKE = "loss_spike"
GRAD_SPIKE = "grad_spike"
GRAD_EXPLOSION = "grad_explosion"
GRAD_VANISHING = "grad_vanishing"
DIVERGENCE = "divergence"
LOSS_SCALE_COLLAPSE = "loss_scale_collapse"
CLIPPING = "clipping"
OVERFITTING = "overfitting"
EVAL_SPARSE = "eval_sparse"
UNDERFITTING = "underfitting"
PLATEAU = "plateau"
FROZEN_LOSS = "frozen_loss"
LABEL_MASKING = "label_masking"
THROUGHPUT_DROP = "throughput_drop"
PERIODIC_STALL = "periodic_stall"
MEMORY_LEAK = "memory_leak"
MEMORY_PRESSURE = "memory_pressure"
LR_SCHEDULE = "lr_schedule"
UPDATE_RATIO = "update_ratio"
HANG = "hang"
CRASH = "crash"
STRAGGLER = "straggler"
HEALTHY = "healthy"
RANK_DIVERGENCE = "rank_divergence"
GPU_THROTTLE = "gpu_throttle"
GPU_ECC_ERROR = "gpu_ecc_error"
GPU_XID = "gpu_xid"
GPU_UNDERUSED = "gpu_underused"
EVAL_BROKEN = "eval_broken"


@dataclass(frozen=True, slots=True)
class FindingType:
    """One finding type: its meaning, its charts (report ids), the symptoms it owns as a root cause."""

    name: str
    summary: str
    charts: tuple[str, ...] = ("loss",)
    symptoms: frozenset[str] = frozenset()
    escalates: str | None = None
    every_chart: bool = False  # the run stopped: marked on every chart
    resolve_steps: int | None = None
    """An incident of this type resolves after this many steps with no new sign of it (a later burst is a new
    incident that pages); None: its detector says when the run is back to its pre-incident level."""
    run_wide: bool = False
    """One incident for the whole run however many ranks see it (a stuck collective stalls every rank): one
    page across ranks."""


_INSTABILITY = frozenset({LOSS_SPIKE, GRAD_SPIKE, GRAD_EXPLOSION, NAN, LOSS_SCALE_COLLAPSE, DIVERGENCE, CLIPPING,
                          UPDATE_RATIO})

# The one list of types, in wire order (FINDING_TYPES): append a new row at the end, never insert or reorder.
_TYPES = (
    # 20 finite steps: a loss scaler's overflow run is over within a few; a NaN back after that is news
    # A loss of exactly 0 (or one repeated value) while the gradients are NaN is no masked label: the HF
    # Trainer's `logging_nan_inf_filter` logs a window of only NaN losses as 0.
    # A NaN in another series inside an open NaN incident (the eval loss after the train loss) is the same one.
    # run-wide: under data parallelism one rank's NaN gradient is every rank's after the all-reduce (one page)
    FindingType(NAN, "a NaN/Inf loss, grad norm or eval loss", resolve_steps=20,
                symptoms=frozenset({NAN, LABEL_MASKING, FROZEN_LOSS}), run_wide=True),
    # an update/weight ratio that jumped just before is the spike's own lead-up (an LR x100), not a second page
    FindingType(LOSS_SPIKE, "the loss jumped far above its recent level", ("loss",),
                symptoms=frozenset({GRAD_SPIKE, GRAD_EXPLOSION, LOSS_SCALE_COLLAPSE, NAN, CLIPPING, UPDATE_RATIO})),
    FindingType(GRAD_SPIKE, "the gradient norm jumped far above its level", ("grad_norm", "loss")),
    FindingType(GRAD_EXPLOSION, "the gradient norm grew by orders of magnitude", ("grad_norm", "loss"),
                escalates=GRAD_SPIKE),
    FindingType(GRAD_VANISHING, "gradients shrank towards zero", ("grad_norm",)),
    FindingType(DIVERGENCE, "the loss rose and did not come back", ("loss", "grad_norm"), symptoms=_INSTABILITY),
    # every update skipped: the weights stand still, which the eval and train losses then show
    FindingType(LOSS_SCALE_COLLAPSE, "the fp16 loss scale fell to its floor", ("loss_scale", "loss"),
                symptoms=frozenset({FROZEN_LOSS, PLATEAU})),
    FindingType(CLIPPING, "gradient clipping on most steps", ("grad_norm",)),
    FindingType(OVERFITTING, "eval loss rising while train loss falls"),
    FindingType(EVAL_SPARSE, "too few evals to judge overfitting"),
    FindingType(UNDERFITTING, "the loss stays far above what the run should reach", symptoms=frozenset({PLATEAU})),
    FindingType(PLATEAU, "the loss stopped improving", ("loss", "lr")),
    # one stop of learning, seen on several series (the eval loss repeating, then the train loss; a knee in
    # the curve; gradients gone to 0): one incident
    FindingType(FROZEN_LOSS, "the loss repeats one exact value", ("loss", "lr"),
                symptoms=frozenset({FROZEN_LOSS, PLATEAU, GRAD_VANISHING})),
    FindingType(LABEL_MASKING, "a loss of exactly 0: every label masked"),
    FindingType(THROUGHPUT_DROP, "a persistent slowdown", ("throughput", "step_time")),
    FindingType(PERIODIC_STALL, "slow steps at intervals (GC, evals, I/O)", ("step_time", "throughput")),
    FindingType(MEMORY_LEAK, "memory growing step after step", ("memory",)),
    FindingType(MEMORY_PRESSURE, "memory near the device limit", ("memory", "loss")),
    FindingType(LR_SCHEDULE, "a learning-rate schedule event", ("lr", "loss")),
    FindingType(UPDATE_RATIO, "update/weight ratio far too large", ("grad_norm", "loss")),
    FindingType(HANG, "no step completed for a long time", every_chart=True, resolve_steps=1, run_wide=True),
    FindingType(CRASH, "the run died", every_chart=True),
    FindingType(STRAGGLER, "one rank slower than the others", ("step_time", "throughput")),
    FindingType(HEALTHY, "a known non-problem, or the run's clean bill of health"),
    FindingType(RANK_DIVERGENCE, "ranks out of step, or one rank's memory far above the others",
                ("step_time", "memory")),
    FindingType(GPU_THROTTLE, "a GPU's clocks held down (thermal, power cap, hardware slowdown)",
                ("gpu", "throughput", "step_time")),
    FindingType(GPU_ECC_ERROR, "an uncorrectable ECC memory error on a GPU", ("gpu",), every_chart=True),
    FindingType(GPU_XID, "the GPU driver reported an XID error", ("gpu",), every_chart=True),
    FindingType(GPU_UNDERUSED, "the GPU idles while steps run: input- or host-bound", ("gpu", "step_time")),
    # the eval's quality metrics never move (exactly 0 at every eval) while the train loss does: the model or the
    # eval is broken; an overfitting rise of that eval's loss is its symptom, not the news
    FindingType(EVAL_BROKEN, "an eval metric stuck (exactly 0 at every eval) while the model trains",
                symptoms=frozenset({OVERFITTING})),
)

FINDING_TYPES: tuple[str, ...] = tuple(t.name for t in _TYPES)
"""Every finding type's name, in wire order: a rank sends a type as its index here (`detect/straggler.py`), so
the order is append-only. Also the documented vocabulary of `diagnose --json`."""

CATALOGUE: dict[str, FindingType] = {t.name: t for t in _TYPES}
"""Every finding type by name (its row)."""

ESCALATIONS: dict[str, str] = {t.name: t.escalates for t in _TYPES if t.escalates}
"""A finding of the key type replaces one of the value type at the same step (same source)."""


def owns(root: str, symptom: str) -> bool:
    """Does an open incident of type `root` own a finding of type `symptom`?"""
    t = CATALOGUE.get(root)
    return t is not None and symptom in t.symptoms


def is_root(name: str) -> bool:
    t = CATALOGUE.get(name)
    return t is not None and bool(t.symptoms)


def resolve_steps(name: str) -> int | None:
    """Steps without a new sign of it after which an incident of this type is over (None: its detector decides)."""
    t = CATALOGUE.get(name)
    return t.resolve_steps if t is not None else None


def run_wide(name: str) -> bool:
    t = CATALOGUE.get(name)
    return t is not None and t.run_wide


def charts(name: str) -> tuple[str, ...]:
    """The report charts a finding of this type is drawn on (`every_chart` types: all of them)."""
    t = CATALOGUE.get(name)
    return t.charts if t is not None else ("loss",)


def every_chart(name: str) -> bool:
    t = CATALOGUE.get(name)
    return t is not None and t.every_chart
