"""Numerics: NaN/Inf losses and gradients, fp16 overflows and a collapsed loss scale."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from stethoscope.explain.model import RESUME, Detail, Hit, Line, Signature, first_group, rx
from stethoscope.findings.catalogue import LOSS_SCALE_COLLAPSE, NAN


# -- parsers ------------------------------------------------------------------------------------

_SCALE_NUM = r"([\d.]+(?:[eE][+-]?\d+)?)"
_ATTEMPTED = re.compile(r"Attempted loss scale: " + _SCALE_NUM)
_REDUCED = (re.compile(r"reducing to " + _SCALE_NUM), re.compile(r"reducing loss scale to " + _SCALE_NUM),
            re.compile(r"setting loss scale to:?\s*" + _SCALE_NUM))
_ANOMALY_OP = re.compile(r"Function '(\w+)' returned nan values")


def parse_overflow(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    scales = [float(m.group(1)) for h in hits for p in (_ATTEMPTED, *_REDUCED) if (m := p.search(h.line.text))]
    low = min(scales) if scales else None
    evidence: dict[str, Any] = {"overflows": len(hits), "min_loss_scale": low}
    severity = "info"
    if low is not None and low <= 1:
        severity = "error"
    elif (low is not None and low < 128) or len(hits) >= 50:
        severity = "warning"
    summary = f"{len(hits)} skipped step(s)" + (f", loss scale fell to {low:g}" if low is not None else "")
    return Detail(evidence=evidence, summary=summary, severity=severity)


def parse_nan(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    m = first_group(hits, _ANOMALY_OP)
    if not m:
        return Detail(evidence={"nan_lines": len(hits)})
    return Detail(evidence={"nan_lines": len(hits), "op": m.group(1)}, summary=f"first produced by {m.group(1)}",
                  causes=(f"autograd anomaly mode names {m.group(1)} as the first op to produce NaN",))


# -- signatures ---------------------------------------------------------------------------------

_I = re.IGNORECASE

FP16_LOSS_SCALE_MIN = Signature(
    "fp16_loss_scale_min", rx(r"Current loss scale already at minimum", r"Minimum loss scale reached",
                               r"loss scale .*(?:reached|below) (?:the )?minimum", flags=_I),
    LOSS_SCALE_COLLAPSE, "critical", "fp16 loss scale collapsed to its minimum: the run aborted",
    ("gradients overflow on every step: the loss diverged (LR too high, no warm-up) or fp16 cannot hold "
     "the activations",),
    ("train in bf16 instead of fp16 where the hardware supports it",
     "lower the learning rate or lengthen warm-up; clip gradients",
     f"{RESUME} from before the overflows started and skip the batches around it"))


NAN_LOSS = Signature(
    "nan_loss", rx(r"(?<![A-Za-z])loss\b['\"]?\s*(?:is|became|was|=|:)?\s*['\"]?(?:nan|-?inf)\b",
                    r"(?<![A-Za-z])grad[_ ]?norm\b['\"]?\s*(?:is|=|:)?\s*(?:nan|-?inf)\b",
                    r"Detected (?:NaN|nan|inf|non-finite) (?:values? in )?loss", r"non-finite loss",
                    r"returned nan values in its \d+\w* output", r"NaN or Inf found in input tensor",
                    flags=_I),
    NAN, "critical", "Loss or gradients became NaN/Inf",
    ("learning rate too high or warm-up too short (the loss usually spikes first)",
     "fp16 overflow: activations or gradients beyond 65504",
     "a bad batch: empty sequences or all labels masked (0/0 in the mean), corrupt samples",
     "log/sqrt/division of zero in a custom loss"),
    ("find the first non-finite step and the batch it used; rerun that step under "
     "torch.autograd.detect_anomaly() to name the op",
     "clip gradients (clip_grad_norm_ 1.0), lower the LR or lengthen warm-up",
     "use bf16 instead of fp16",
     f"{RESUME} before the NaN and skip the offending batches"),
    parse_nan)


FP16_OVERFLOW = Signature(
    "fp16_overflow", rx(r"OVERFLOW! Rank \d+ Skipping step", r"Gradient overflow\.\s+Skipping step",
                         r"overflow detected, setting loss scale to"),
    LOSS_SCALE_COLLAPSE, "warning", "fp16 gradient overflow, steps skipped",
    ("occasional overflows are how dynamic loss scaling works; many in a row, or the scale falling low, "
     "mean the gradients are blowing up",),
    ("nothing to do for a few overflows at the start; if the scale keeps falling, lower the LR and "
     "clip gradients, or switch to bf16",),
    parse_overflow)
