"""The plain data that flows through stethoscope: points, step records, findings, events.

Imports nothing from the package. Metric names carry a namespace and a unit where one applies
(`perf/step_time_s`, `memory/rss_gib`); the constants below are the vocabulary every layer shares.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

# -- metric vocabulary -------------------------------------------------------------------------
LOSS = "train/loss"
EVAL_LOSS = "eval/loss"
LR = "opt/lr"  # first param group; further groups are opt/lr/group{i}
GRAD_NORM = "grad/norm"
GRAD_CLIP_COEF = "grad/clip_coef"
GRAD_ZERO_FRAC = "grad/zero_frac"
PARAM_NORM = "param/norm"
UPDATE_RATIO = "update/ratio"
LOSS_SCALE = "amp/loss_scale"
STEP_TIME = "perf/step_time_s"
DATA_WAIT = "perf/data_wait_s"
TOKENS_PER_S = "perf/tokens_per_s"
SAMPLES_PER_S = "perf/samples_per_s"
TFLOPS = "perf/tflops"
MFU = "perf/mfu"
GC_PAUSE = "perf/gc_pause_s"
CHECKPOINT_TIME = "perf/checkpoint_s"  # the Monitor's own saves and rollbacks after a step, out of step time
RSS = "memory/rss_gib"
CPU_PCT = "system/cpu_pct"
CUDA_ALLOCATED = "memory/cuda_allocated_gib"
CUDA_RESERVED = "memory/cuda_reserved_gib"
CUDA_PEAK = "memory/cuda_max_allocated_gib"
CUDA_TOTAL = "memory/cuda_total_gib"
GLOBAL_BATCH_SIZE = "train/global_batch_size"  # samples per optimizer step, all ranks
SKIPPED = "train/skipped_iterations"
NAN_ITERS = "train/nan_iterations"
GPU_UTIL = "gpu/util_ratio"  # NVML (capture/gpu.py): SM busy share of the last sample period, 0..1
GPU_MEM_UTIL = "gpu/mem_util_ratio"  # memory-bandwidth busy share, 0..1
GPU_TEMP = "gpu/temp_c"
GPU_POWER = "gpu/power_w"
GPU_POWER_LIMIT = "gpu/power_limit_w"
GPU_SM_CLOCK = "gpu/sm_clock_hz"
GPU_MEM_CLOCK = "gpu/mem_clock_hz"
GPU_THROTTLE_THERMAL = "gpu/throttle_thermal"  # 1 while a thermal slowdown holds the clocks down
GPU_THROTTLE_POWER = "gpu/throttle_power"  # 1 while the power cap (or the power brake) holds them down
GPU_THROTTLE_HW = "gpu/throttle_hw_slowdown"  # 1 during a hardware slowdown
GPU_ECC_CORRECTED = "gpu/ecc_corrected_total"  # volatile counts, since the driver loaded
GPU_ECC_UNCORRECTED = "gpu/ecc_uncorrected_total"
GPU_ROWS_PENDING = "gpu/remap_pending"  # 1: rows remapped (or pages retired) waiting for a GPU reset
GPU_PCIE_REPLAYS = "gpu/pcie_replay_total"
GPU_XID = "gpu/xid"  # the XID code of the last critical event in the sample period
GPU_SERIES = (GPU_UTIL, GPU_MEM_UTIL, GPU_TEMP, GPU_POWER, GPU_POWER_LIMIT, GPU_SM_CLOCK, GPU_MEM_CLOCK,
              GPU_THROTTLE_THERMAL, GPU_THROTTLE_POWER, GPU_THROTTLE_HW, GPU_ECC_CORRECTED, GPU_ECC_UNCORRECTED,
              GPU_ROWS_PENDING, GPU_PCIE_REPLAYS, GPU_XID)
QUEUE_DROPS = "stethoscope/dropped_points"
INTERNAL_ERRORS = "stethoscope/internal_errors"

UNITS = {
    LOSS: "nats", EVAL_LOSS: "nats", LR: "", GRAD_NORM: "", PARAM_NORM: "", UPDATE_RATIO: "",
    STEP_TIME: "s", DATA_WAIT: "s", TOKENS_PER_S: "tokens/s", SAMPLES_PER_S: "samples/s",
    TFLOPS: "TFLOP/s", MFU: "fraction", GC_PAUSE: "s", CHECKPOINT_TIME: "s", RSS: "GiB", CPU_PCT: "%",
    CUDA_ALLOCATED: "GiB", CUDA_RESERVED: "GiB", CUDA_PEAK: "GiB", CUDA_TOTAL: "GiB",
    GPU_UTIL: "ratio", GPU_MEM_UTIL: "ratio", GPU_TEMP: "°C", GPU_POWER: "W", GPU_POWER_LIMIT: "W",
    GPU_SM_CLOCK: "Hz", GPU_MEM_CLOCK: "Hz", GPU_THROTTLE_THERMAL: "flag", GPU_THROTTLE_POWER: "flag",
    GPU_THROTTLE_HW: "flag", GPU_ECC_CORRECTED: "errors", GPU_ECC_UNCORRECTED: "errors", GPU_ROWS_PENDING: "flag",
    GPU_PCIE_REPLAYS: "replays", GPU_XID: "xid",
}

def unit_of(name: str) -> str:
    """The unit of a known metric, also under a per-device name (`gpu/temp_c/gpu1` -> "°C"); else ""."""
    unit = UNITS.get(name)
    if unit is None:
        base, _, dev = name.rpartition("/")
        if dev.removeprefix("gpu").removeprefix("cuda").isdigit():
            unit = UNITS.get(base)
    return unit or ""


# -- severities --------------------------------------------------------------------------------
SEVERITIES = ("info", "warning", "error", "critical")


def severity_rank(severity: str) -> int:
    """Position of `severity` in SEVERITIES (info=0 … critical=3); unknown names raise ValueError."""
    try:
        return SEVERITIES.index(severity)
    except ValueError:
        raise ValueError(f"unknown severity {severity!r}; expected one of {', '.join(SEVERITIES)}") from None


@dataclass(frozen=True, slots=True)
class Point:
    """One value of one series at one step. `time` is unix seconds, or None when the source had none."""

    name: str
    step: int
    value: float
    time: float | None = None


@dataclass(slots=True)
class StepRecord:
    """Every value known for one step: what a detector sees."""

    step: int
    values: dict[str, float]
    time: float | None = None

    def get(self, name: str) -> float | None:
        return self.values.get(name)


@dataclass(slots=True)
class Finding:
    """A problem (or a notable fact) found in a run.

    `step` and `end_step` are in the run's own step numbering. `evidence` holds the numbers the
    finding rests on; `causes` are probable causes, most likely first; `fixes` what to try;
    `symptoms` the findings an incident root owns (`{"type", "step"}`, see `findings.incidents`).
    """

    type: str  # one of `findings.catalogue.FINDING_TYPES`
    severity: str
    step: int | None
    message: str
    end_step: int | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    causes: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)
    source: str = ""
    symptoms: list[dict[str, Any]] = field(default_factory=list)  # an incident's owned findings: {type, step}

    def __post_init__(self) -> None:
        severity_rank(self.severity)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["evidence"] = json_safe(d["evidence"])
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Finding:
        keys = ("type", "severity", "step", "message", "end_step", "evidence", "causes", "fixes", "source", "symptoms")
        return cls(**{k: d[k] for k in keys if k in d})


def json_safe(obj: Any) -> Any:
    """Replace NaN/±Inf floats (not valid JSON) by the strings "nan"/"inf"/"-inf", recursively."""
    if isinstance(obj, float):
        if math.isnan(obj):
            return "nan"
        if math.isinf(obj):
            return "inf" if obj > 0 else "-inf"
        return obj
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj
