"""Estimators a person runs before a job: training memory per GPU (and which GPUs it fits, and what
to change when it does not), bytes per checkpoint and under retention, and MFU from a throughput.

From a local HF config.json or from numbers; no torch, no downloads.
"""

from __future__ import annotations

from stethoscope.debug.estimate.gpus import GPUS, gpu
from stethoscope.debug.estimate.memory import Plan, estimate, fits, fixes, to_fit
from stethoscope.debug.estimate.shape import ModelShape, from_config, from_numbers, parse_count

__all__ = ["GPUS", "ModelShape", "Plan", "estimate", "fits", "fixes", "from_config", "from_numbers", "gpu",
           "parse_count", "to_fit"]
