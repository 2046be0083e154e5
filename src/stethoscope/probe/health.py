"""The cross-rank health gather: every N steps, on the training thread, one all_gather of a small fixed-size
float vector per rank (step, step-time median, compute median, data wait, memory, last finding, GC time, GPU
throttle, and the time outside the backward pass: a rank late to DDP's gradient all-reduce makes the others wait
inside their backward, so whole step times agree and only this share tells the late one apart) —
O(world size) bytes. Every rank keeps the gathered table (shown by `status`); rank 0 judges it
(detect.straggler) and reports what it finds, naming the rank and the evidence."""

from __future__ import annotations

import gc
import logging
import statistics
import time
from typing import Any

from stethoscope.config import env_rendezvous
from stethoscope.detect.straggler import FIELDS, RankHealth
from stethoscope.probe.config import ProbeConfig
from stethoscope.records import Finding

log = logging.getLogger(__name__)
_KEY = "stethoscope/health/monitor"


class Health:
    """`add(step_s, compute_s, data_s, backward_s)` per step; `due(step)`; `gather(step, mem_gib, code)` → findings (rank 0)."""

    def __init__(self, config: ProbeConfig, rank: int, world_size: int) -> None:
        self.every = config.health_every
        self.rank, self.world_size = rank, world_size
        self.judge = RankHealth(config.straggler_threshold, config.straggler_reports, config.memory_ratio,
                                config.memory_min_gib)
        self.table: list[dict[str, float]] = []
        self.gathers = 0
        self.failed = 0
        self._step: list[float] = []
        self._compute: list[float] = []
        self._data: list[float] = []
        self._own: list[float] = []
        self._gc_s = 0.0
        self._gc_start = 0.0
        self.agree_s = config.health_agree_s
        self._ready: bool | None = None
        self._store: Any = None
        self._announce()
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        elif self._gc_start:
            self._gc_s += time.perf_counter() - self._gc_start
            self._gc_start = 0.0

    def add(self, step_s: float | None, compute_s: float | None, data_s: float | None,
            backward_s: float | None = None) -> None:
        if step_s is not None:
            self._step.append(step_s)
            if backward_s is not None:
                self._own.append(max(0.0, step_s - backward_s))
        if compute_s:
            self._compute.append(compute_s)
        if data_s is not None:
            self._data.append(data_s)

    def ready(self) -> bool:
        """Before the first gather: do all ranks have a Monitor? The gather is a collective, so a Monitor on
        rank 0 only would hang the run in it. Each rank announces itself in the rendezvous store when it
        starts; the first gather waits (at most `agree_s`) for all of them, and is switched off if one is
        missing or the store cannot be reached — with one warning, never a hang."""
        if self._ready is None:
            self._ready = self.world_size == 1 or self._all_present()
            if not self._ready:
                log.warning("stethoscope: cross-rank health checks are off: not every rank has a Monitor (create "
                            "one on every rank, or pass serve=ProbeConfig(health_every=0))")
        return self._ready

    def _announce(self) -> None:
        if self.world_size == 1:
            return
        try:
            self._store = _rendezvous_store()
            if self._store is not None:
                self._store.set(f"{_KEY}/{self.rank}", "1")
        except Exception:  # noqa: BLE001 - no store: no health gather (decided at the first one)
            self._store = None

    def _all_present(self) -> bool:
        if self._store is None:
            return False
        from datetime import timedelta

        try:
            self._store.wait([f"{_KEY}/{r}" for r in range(self.world_size)], timedelta(seconds=self.agree_s))
        except Exception:  # noqa: BLE001 - a timeout: some rank has no Monitor
            return False
        return True

    def due(self, calls: int) -> bool:
        """Every `every` calls of Monitor.step (the same count on every rank, whatever their step numbers)."""
        return self.every > 0 and calls > 0 and calls % self.every == 0

    def gather(self, step: int, mem_gib: float, finding: float, gpu: dict[str, float] | None = None) -> list[Finding]:
        """One all_gather (a collective: every rank must call it at the same point)."""
        import torch
        import torch.distributed as dist

        mine = [float(self.rank), float(step), _median(self._step), _median(self._compute), _median(self._data),
                mem_gib, finding, self._gc_s, float(len(self._step)), *gpu_fields(gpu or {}), _median(self._own)]
        self._step, self._compute, self._data, self._own, self._gc_s = [], [], [], [], 0.0
        device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
        local = torch.tensor(mine, dtype=torch.float64, device=device)
        out = [torch.empty_like(local) for _ in range(self.world_size)]
        dist.all_gather(out, local)
        rows = torch.stack(out).cpu().tolist()  # host sync: once per health report
        self.table = [dict(zip(FIELDS, r)) for r in rows]
        self.gathers += 1
        return self.judge.update(self.table, step) if self.rank == 0 else []

    def close(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)


def _rendezvous_store() -> Any:
    """A client of the job's rendezvous TCPStore (MASTER_ADDR:MASTER_PORT), or None outside torchrun-like launches."""
    from datetime import timedelta

    import torch.distributed as dist

    where = env_rendezvous()
    if where is None:
        return None
    return dist.TCPStore(where[0], where[1], is_master=False, timeout=timedelta(seconds=10))


def gpu_fields(last: dict[str, float]) -> tuple[float, float]:
    """(throttle code, temperature) of the rank's first GPU from its last NVML sample (capture/gpu.py)."""
    from stethoscope import records as R

    code = 2.0 if last.get(R.GPU_THROTTLE_THERMAL) or last.get(R.GPU_THROTTLE_HW) else (
        1.0 if last.get(R.GPU_THROTTLE_POWER) else 0.0)
    return code, float(last.get(R.GPU_TEMP) or 0.0)


def optimizer_step_hook(callback: Any) -> Any:
    """`callback()` when any torch optimizer's step begins (the backward pass, with DDP's all-reduce, is over);
    returns the handle to remove it."""
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    return register_optimizer_step_pre_hook(lambda *_: callback())


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else 0.0


def distributed_world() -> tuple[int, int] | None:
    """(rank, world size) when torch.distributed is initialized, else None (a single rank gathers only itself)."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None:
        return None
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()):
        return None
    return dist.get_rank(), dist.get_world_size()
