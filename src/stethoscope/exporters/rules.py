"""Prometheus alerting rules (for Alertmanager) equivalent to the built-in detectors' thresholds.

The detectors run inside the training process on every step; these rules restate their thresholds in
PromQL over the gauges every rank serves (see `exporters.prometheus`), with windows in wall-clock time
(`window`: the recent level a spike is measured against; `long_window`: the baseline). One more rule
forwards every error or critical finding the in-process detectors raised.
"""

from __future__ import annotations

import json
from typing import Any

from stethoscope.detect.config import DetectConfig
from stethoscope.exporters.prometheus import FINDINGS, LAST_STEP_TIME, metric_name
from stethoscope.records import (
    CUDA_RESERVED,
    CUDA_TOTAL,
    EVAL_LOSS,
    GPU_ECC_UNCORRECTED,
    GPU_THROTTLE_THERMAL,
    GRAD_CLIP_COEF,
    GRAD_NORM,
    LOSS,
    LOSS_SCALE,
    LR,
    RSS,
    STEP_TIME,
    UPDATE_RATIO,
)

SERIOUS = 'severity=~"error|critical"'


def alert_rules(config: DetectConfig | None = None, run: str | None = None, window: str = "10m",
                long_window: str = "1h", hang_after_s: float = 600.0) -> dict[str, Any]:
    """The rule file as a dict ({"groups": [...]}), for `run` (a `run` label) or every run."""
    c = config or DetectConfig()
    sel = "{" + f"run={json.dumps(run)}" + "}" if run else ""

    def m(series: str) -> str:
        return metric_name(series) + sel

    def median(series: str, span: str) -> str:
        return f"quantile_over_time(0.5, {m(series)}[{span}])"

    loss, grad = m(LOSS), m(GRAD_NORM)
    rules = [
        _rule("StethoscopeLossNotFinite", f"({loss} != {loss}) or (abs({loss}) == +Inf)", "critical",
              "the training loss is NaN or infinite", "0m"),
        _rule("StethoscopeGradNormNotFinite", f"({grad} != {grad}) or (abs({grad}) == +Inf)", "critical",
              "the gradient norm is NaN or infinite", "0m"),
        _rule("StethoscopeLossSpike", f"{loss} > {1 + c.loss_spike_warn_rel:g} * {median(LOSS, window)}",
              "warning", f"the loss is over {c.loss_spike_warn_rel:.0%} above its median of the last {window} "
              "(detector: loss_spike_warn_rel)", "0m"),
        _rule("StethoscopeGradNormSpike", f"{grad} > {c.grad_spike_min_ratio:g} * {median(GRAD_NORM, window)}",
              "info", f"the gradient norm is over {c.grad_spike_min_ratio:g}x its median of the last {window} "
              "(detector: grad_spike_min_ratio)", "0m"),
        _rule("StethoscopeGradExplosion", f"{grad} > {c.grad_explosion_ratio:g} * {median(GRAD_NORM, long_window)}",
              "error", f"the gradient norm stays over {c.grad_explosion_ratio:g}x its median of the last "
              f"{long_window} (detector: grad_explosion_ratio)", "2m"),
        _rule("StethoscopeGradVanishing", f"{grad} < {c.vanishing_ratio:g} * {median(GRAD_NORM, long_window)}",
              "warning", f"the gradient norm fell below {c.vanishing_ratio:g}x its median of the last "
              f"{long_window} (detector: vanishing_ratio)", "5m"),
        _rule("StethoscopeDivergence", f"avg_over_time({loss}[{window}]) > {1 + c.divergence_rise_rel:g} * "
              f"min_over_time(avg_over_time({loss}[{window}])[{long_window}:1m])", "error",
              f"the smoothed loss is over {c.divergence_rise_rel:.0%} above its best of the last {long_window} "
              "(detector: divergence_rise_rel)", window),
        _rule("StethoscopeClippingOften", f"avg_over_time(({m(GRAD_CLIP_COEF)} < bool 1)[{window}:]) > "
              f"{c.clip_fraction:g}", "warning", f"gradients were clipped on over {c.clip_fraction:.0%} of the "
              "steps: the learning rate may be too high (detector: clip_fraction)", window),
        _rule("StethoscopeUpdateRatioHigh", f"{m(UPDATE_RATIO)} > {c.update_ratio_high:g}", "warning",
              f"the update/weight ratio is above {c.update_ratio_high:g} (healthy: about 1e-3; detector: "
              "update_ratio_high)", "5m"),
        _rule("StethoscopeLossScaleCollapse", f"{m(LOSS_SCALE)} <= {c.min_loss_scale:g}", "error",
              f"the fp16 loss scale collapsed to {c.min_loss_scale:g} or below (detector: min_loss_scale)", "0m"),
        _rule("StethoscopeSlowdown", f"{m(STEP_TIME)} > {1 + c.drop_min_rel:g} * "
              f"{median(STEP_TIME, long_window)}", "warning", f"steps take over {c.drop_min_rel:.0%} longer "
              f"than their median of the last {long_window} (detector: drop_min_rel)", window),
        _rule("StethoscopeMemoryNearLimit", f"{m(CUDA_RESERVED)} / {m(CUDA_TOTAL)} > {c.memory_near_limit:g}",
              "warning", f"device memory is above {c.memory_near_limit:.0%} of the total (detector: "
              "memory_near_limit)", "1m"),
        _rule("StethoscopeMemoryGrowth", f"{m(RSS)} > {1 + c.leak_min_rel:g} * min_over_time({m(RSS)}"
              f"[{long_window}]) and ({m(RSS)} - min_over_time({m(RSS)}[{long_window}])) > {0.25 * 2**30:.0f}", "warning",
              f"host memory grew over {c.leak_min_rel:.0%} (and 0.25 GiB) in {long_window}: a leak? "
              "(detector: leak_min_rel)", window),
        _rule("StethoscopeOverfitting", f"{m(EVAL_LOSS)} > {1 + c.overfit_min_rel:g} * "
              f"min_over_time({m(EVAL_LOSS)}[{long_window}])", "warning", f"the eval loss is over "
              f"{c.overfit_min_rel:.0%} above its best of the last {long_window} (detector: overfit_min_rel)", window),
        _rule("StethoscopeLearningRateZero", f"{m(LR)} == 0", "warning", "the learning rate is 0 "
              "(detector: lr_zero_records)", window),
        _rule("StethoscopeStalled", f"time() - {LAST_STEP_TIME}{sel} > "
              f"{hang_after_s:g}", "error", f"no step recorded for over {hang_after_s:g} s: a hang?", "0m"),
        _rule("StethoscopeGpuEccError", f"increase({m(GPU_ECC_UNCORRECTED)}[5m]) > 0", "critical",
              "GPU {{ $labels.gpu }} reported an uncorrectable ECC error: drain the node", "0m"),
        _rule("StethoscopeGpuThermalThrottle", f"min_over_time({m(GPU_THROTTLE_THERMAL)}[{window}]) == 1", "warning",
              "GPU {{ $labels.gpu }} has been thermally throttled for " + window + ": check the node's cooling",
              "0m"),
        _rule("StethoscopeFinding", f"increase({FINDINGS}_total{_labels(sel, SERIOUS)}[5m]) > 0",
              "{{ $labels.severity }}", "stethoscope raised a {{ $labels.type }} finding "
              "(stethoscope diagnose the run for causes and fixes)", "0m"),
    ]
    if c.grad_norm_ceiling is not None:
        rules.append(_rule("StethoscopeGradNormCeiling", f"{grad} > {c.grad_norm_ceiling:g}", "warning",
                           f"the gradient norm is above {c.grad_norm_ceiling:g} (detector: grad_norm_ceiling)", "0m"))
    return {"groups": [{"name": "stethoscope" + (f"-{run}" if run else ""), "rules": rules}]}


def _labels(sel: str, extra: str) -> str:
    return "{" + ", ".join(x for x in (sel.strip("{}"), extra) if x) + "}"


def _rule(name: str, expr: str, severity: str, summary: str, for_: str) -> dict[str, Any]:
    return {"alert": name, "expr": expr, "for": for_,
            "labels": {"severity": severity, "source": "stethoscope"},
            "annotations": {"summary": "{{ $labels.run }} rank {{ $labels.rank }}: " + summary}}


def to_yaml(obj: Any, indent: int = 0) -> str:
    """A rule file as YAML (strings JSON-quoted, which YAML reads as they are); no PyYAML needed."""
    pad = " " * indent
    if isinstance(obj, dict):
        lines = []
        for k, v in obj.items():
            if isinstance(v, (dict, list)) and v:
                lines.append(f"{pad}{k}:\n{to_yaml(v, indent + 2)}")
            else:
                lines.append(f"{pad}{k}: {_scalar(v)}")
        return "\n".join(lines)
    if isinstance(obj, list):
        items = []
        for v in obj:
            text = to_yaml(v, indent + 2) if isinstance(v, (dict, list)) else pad + "  " + _scalar(v)
            items.append(f"{pad}- {text.lstrip()}")
        return "\n".join(items)
    return pad + _scalar(obj)


def _scalar(v: Any) -> str:
    if isinstance(v, (dict, list)):
        return "{}" if isinstance(v, dict) else "[]"
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    return json.dumps(v) if isinstance(v, str) else repr(v)
