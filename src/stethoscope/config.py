"""Typed configuration of the live Monitor, and the one place that reads environment variables.

Imports nothing from the package.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

GRAD_NORM_MODES = ("global", "layers", "off")


@dataclass
class MonitorConfig:
    """How much the Monitor captures and how often it writes."""

    flush_interval: float = 1.0
    """Seconds: every metric is durable in the store at most this long after `step()` returned."""

    log_every: int = 10
    """Steps between host transfers of device-side values (loss, norms); a flush also happens when
    `flush_interval / 2` seconds have passed, whichever comes first."""

    grad_norms: str = "global"
    """"global": one fused global grad norm per step; "layers": plus per-tensor norms every
    `layers_every` steps; "off": no gradient statistics."""

    layers_every: int = 50
    """Steps between per-layer gradient norms when grad_norms="layers"."""

    details_every: int = 10
    """Steps between the costlier statistics: parameter norm, update/weight ratio, zero-grad fraction."""

    update_ratio_max_mib: float = 256.0
    """Parameters copied (at most this many MiB) to measure the update/weight ratio on a sampled step."""

    system_every: float = 1.0
    """Seconds between host/device memory and CPU samples."""

    gpu_health: Any = True  # bool | an NVML stand-in such as stethoscope.testing.FakeNvml
    """Sample NVML (utilization, temperature, power, clocks, throttling, ECC, XID) on a thread of its own
    every `system_every` seconds when `nvidia-ml-py` and a GPU are present; False: never."""

    max_queue: int = 1_000_000
    """Points waiting for the writer; beyond this `put` drops and counts (never blocks)."""

    detect: Any = True  # bool | stethoscope.detect.DetectConfig (not imported: config imports nothing)
    """Run the streaming detectors on the writer thread and record findings live: True with the default
    thresholds, a `stethoscope.detect.DetectConfig` with those thresholds, False not at all."""

    alerts: Any = None  # None | False | path | stethoscope.act.AlertsConfig | channel(s) (config imports nothing)
    """Where alerts about incidents go: a TOML file's path, a `stethoscope.act.AlertsConfig`, or channel
    objects; None reads the file named by $STETHOSCOPE_ALERTS (no alerts when it is unset); False: none."""

    serve: Any = True  # bool | stethoscope.probe.ProbeConfig (not imported: config imports nothing)
    """Look inside the live run: a token-protected probe server on 127.0.0.1, the hang watchdog and (under
    torch.distributed) the cross-rank health gather. True with the defaults, a `stethoscope.probe.ProbeConfig`,
    or False for none of them."""

    strict: bool = False
    """Re-raise stethoscope's own failures (tests); by default they are counted and logged only."""

    def __post_init__(self) -> None:
        if self.flush_interval <= 0:
            raise ValueError(f"flush_interval must be > 0 seconds, got {self.flush_interval}")
        for name in ("log_every", "layers_every", "details_every", "max_queue"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.grad_norms not in GRAD_NORM_MODES:
            raise ValueError(f"grad_norms must be one of {GRAD_NORM_MODES}, got {self.grad_norms!r}")
        if self.update_ratio_max_mib < 0 or self.system_every <= 0:
            raise ValueError("update_ratio_max_mib must be >= 0 and system_every > 0")
        if not isinstance(self.detect, bool) and not (dataclasses.is_dataclass(self.detect)
                                                      and not isinstance(self.detect, type)):
            raise ValueError(f"detect must be True, False or a DetectConfig, got {self.detect!r}")
        if not isinstance(self.serve, bool) and not (dataclasses.is_dataclass(self.serve)
                                                     and not isinstance(self.serve, type)):
            raise ValueError(f"serve must be True, False or a stethoscope.probe.ProbeConfig, got {self.serve!r}")


def env_rank() -> tuple[int, int]:
    """(rank, world size) from the launcher's environment (torchrun, SLURM), or (0, 1)."""
    for rank_key, world_key in (("RANK", "WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS")):
        if rank_key in os.environ:
            try:
                return int(os.environ[rank_key]), int(os.environ.get(world_key, "1"))
            except ValueError:
                continue
    return 0, 1


def env_runs_dir() -> str:
    """Where `stethoscope runs` looks by default: $STETHOSCOPE_RUNS or ./runs."""
    return os.environ.get("STETHOSCOPE_RUNS", "runs")


def env_alerts_file() -> str | None:
    """The alerts TOML file a Monitor uses when given none: $STETHOSCOPE_ALERTS, or None."""
    return os.environ.get("STETHOSCOPE_ALERTS") or None


def env_secret(name: str) -> str | None:
    """The value of the environment variable `name` (a webhook URL, a routing key, a password), or None."""
    return os.environ.get(name) or None


def env_live_dir() -> str:
    """Where live processes register their probe server: $STETHOSCOPE_LIVE_DIR, else
    $XDG_RUNTIME_DIR/stethoscope/live, else ~/.cache/stethoscope/live."""
    explicit = os.environ.get("STETHOSCOPE_LIVE_DIR")
    if explicit:
        return explicit
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return os.path.join(runtime, "stethoscope", "live")
    return os.path.join(os.path.expanduser("~"), ".cache", "stethoscope", "live")


def env_autoprobe() -> bool:
    """$STETHOSCOPE=1: start the probe server in a script that never imports stethoscope."""
    return os.environ.get("STETHOSCOPE", "").strip().lower() in ("1", "true", "yes", "on")


def env_probe_token() -> str | None:
    """$STETHOSCOPE_TOKEN: the token `stethoscope probe HOST:PORT` sends when no token file names that address."""
    return os.environ.get("STETHOSCOPE_TOKEN") or None


def env_rendezvous() -> tuple[str, int] | None:
    """torch.distributed's rendezvous store (MASTER_ADDR, MASTER_PORT), as torchrun sets them, or None."""
    addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if not addr or not port or not port.isdigit():
        return None
    return addr, int(port)
