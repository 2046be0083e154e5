"""Every finding type once: what it means, which charts show it, what it owns and what it escalates.

Detectors, the findings pipeline, the report and (later) alerts read this table; adding a type
touches one place (plus its advice in `diagnose/knowledge.py`, which a test checks exists).

An incident root (a type with `symptoms`) owns the findings of those types that start inside its
span, or up to `lead_records`' worth of steps before its onset (the grad norm leads the loss), and
after it while the run has not come back to its pre-incident level: they become its evidence,
not findings of their own. `escalates` names the type a finding replaces at the same step.
"""

from __future__ import annotations

from dataclasses import dataclass


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


_INSTABILITY = frozenset({"loss_spike", "grad_spike", "grad_explosion", "nan", "loss_scale_collapse",
                          "divergence", "clipping", "update_ratio"})

_TYPES = (
    # 20 finite steps: a loss scaler's overflow run is over within a few; a NaN back after that is news
    # A loss of exactly 0 (or one repeated value) while the gradients are NaN is no masked label: the HF
    # Trainer's `logging_nan_inf_filter` logs a window of only NaN losses as 0.
    FindingType("nan", "a NaN/Inf loss, grad norm or eval loss", resolve_steps=20,
                symptoms=frozenset({"label_masking", "frozen_loss"})),
    FindingType("loss_spike", "the loss jumped far above its recent level", ("loss",),
                symptoms=frozenset({"grad_spike", "grad_explosion", "loss_scale_collapse", "nan", "clipping"})),
    FindingType("grad_spike", "the gradient norm jumped far above its level", ("grad_norm", "loss")),
    FindingType("grad_explosion", "the gradient norm grew by orders of magnitude", ("grad_norm", "loss"),
                escalates="grad_spike"),
    FindingType("grad_vanishing", "gradients shrank towards zero", ("grad_norm",)),
    FindingType("divergence", "the loss rose and did not come back", ("loss", "grad_norm"), symptoms=_INSTABILITY),
    FindingType("loss_scale_collapse", "the fp16 loss scale fell to its floor", ("loss_scale", "loss")),
    FindingType("clipping", "gradient clipping on most steps", ("grad_norm",)),
    FindingType("update_ratio", "update/weight ratio far too large", ("grad_norm", "loss")),
    FindingType("overfitting", "eval loss rising while train loss falls"),
    FindingType("eval_sparse", "too few evals to judge overfitting"),
    FindingType("underfitting", "the loss stays far above what the run should reach",
                symptoms=frozenset({"plateau"})),
    FindingType("plateau", "the loss stopped improving", ("loss", "lr")),
    FindingType("frozen_loss", "the loss repeats one exact value", ("loss", "lr")),
    FindingType("label_masking", "a loss of exactly 0: every label masked"),
    FindingType("throughput_drop", "a persistent slowdown", ("throughput", "step_time")),
    FindingType("periodic_stall", "slow steps at intervals (GC, evals, I/O)", ("step_time", "throughput")),
    FindingType("memory_leak", "memory growing step after step", ("memory",)),
    FindingType("memory_pressure", "memory near the device limit", ("memory", "loss")),
    FindingType("lr_schedule", "a learning-rate schedule event", ("lr", "loss")),
    FindingType("hang", "no step completed for a long time", every_chart=True, resolve_steps=1, run_wide=True),
    FindingType("crash", "the run died", every_chart=True),
    FindingType("straggler", "one rank slower than the others", ("step_time", "throughput")),
    FindingType("healthy", "a known non-problem, or the run's clean bill of health"),
    FindingType("gpu_throttle", "a GPU's clocks held down (thermal, power cap, hardware slowdown)",
                ("gpu", "throughput", "step_time")),
    FindingType("gpu_ecc_error", "an uncorrectable ECC memory error on a GPU", ("gpu",), every_chart=True),
    FindingType("gpu_xid", "the GPU driver reported an XID error", ("gpu",), every_chart=True),
    FindingType("gpu_underused", "the GPU idles while steps run: input- or host-bound", ("gpu", "step_time")),
    FindingType("rank_divergence", "ranks out of step, or one rank's memory far above the others",
                ("step_time", "memory")),
)

CATALOGUE: dict[str, FindingType] = {t.name: t for t in _TYPES}
"""Every finding type by name: the same set as `records.FINDING_TYPES` (a test keeps the two equal)."""

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
