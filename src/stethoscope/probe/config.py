"""What the live probe does inside a training process: server, hang watchdog, cross-rank health."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass


@dataclass
class ProbeConfig:
    """Options of the probe server, the hang watchdog and the health gather (`Monitor(serve=ProbeConfig(...))`)."""

    host: str = "127.0.0.1"
    """Address the server binds. Anything but a loopback address also needs `allow_remote=True`."""

    port: int = 0
    """TCP port; 0 picks a free one (written, with the token, to the run directory and the live registry)."""

    allow_remote: bool = False
    """Permit a non-loopback `host` (the token is still required on every request)."""

    allow_eval: bool = False
    """Answer `eval` requests (run Python code inside the training process). Off: they get 403."""

    max_request_bytes: int = 1 << 20
    """Request bodies above this size are refused with 413 before they are read."""

    query_timeout_s: float = 10.0
    """A `query` running longer than this is interrupted."""

    watchdog: bool = True
    """Watch for hangs: no step completed within the timeout → stacks, a `hang` finding, an alert."""

    hang_floor_s: float = 60.0
    """The hang timeout is max(this, `hang_factor` × the p99 step time seen so far)."""

    hang_factor: float = 5.0
    """Multiple of the p99 step time (NVIDIA's resiliency extension uses 5× the longest interval)."""

    hang_sample_s: float = 10.0
    """While hung, another snapshot of every thread's stack this often (at most `hang_max_snapshots`)."""

    hang_max_snapshots: int = 20

    faulthandler: bool = True
    """Second line of defence when the GIL is held: faulthandler dumps every thread into the run directory
    after twice the hang timeout without the watchdog thread getting to run."""

    health_every: int = 50
    """Steps between cross-rank health gathers (one all_gather of a few floats per rank); 0: never."""

    health_agree_s: float = 30.0
    """The first gather waits this long for every rank to have announced its Monitor; if one has none (a
    Monitor on rank 0 only), health checks are switched off instead of hanging the run in the collective."""

    straggler_threshold: float = 0.8
    """A rank is slow when fastest median / its median falls below this (0.8: 25% slower; NVIDIA uses 0.75)."""

    straggler_reports: int = 2
    """Health reports in a row a rank must be slow in before it is named a straggler."""

    memory_ratio: float = 1.3
    """A rank using more than this × the median memory of the ranks (and `memory_min_gib` more) is named."""

    memory_min_gib: float = 0.5

    trace_every: int = 0
    """Steps between per-module forward/backward timings (module hooks on one step); 0: off (opt-in)."""

    locals_max_chars: int = 200
    """`backtrace` with locals: each value's repr is cut to this many characters."""

    def __post_init__(self) -> None:
        if not self.allow_remote and not is_loopback(self.host):
            raise ValueError(f"refusing to bind the probe server to {self.host!r}: not a loopback address; pass "
                             "allow_remote=True (the token is still required) or use 127.0.0.1")
        if not 0 <= self.port < 65536:
            raise ValueError(f"port must be 0-65535, got {self.port}")
        for name in ("max_request_bytes", "query_timeout_s", "hang_floor_s", "hang_factor", "hang_sample_s",
                     "hang_max_snapshots", "locals_max_chars"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.health_every < 0 or self.trace_every < 0 or self.straggler_reports < 1:
            raise ValueError("health_every and trace_every must be >= 0, straggler_reports >= 1")
        if not 0 < self.straggler_threshold <= 1:
            raise ValueError(f"straggler_threshold must be in (0, 1], got {self.straggler_threshold}")


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
