"""Bytes per checkpoint save and on disk under a retention policy (the newest K, milestones, the best),
as stethoscope.Checkpoints keeps them: a save is written whole before retention deletes old ones."""

from __future__ import annotations

import math
from typing import Any

from stethoscope.errors import UsageError
from stethoscope.debug.estimate.memory import OPTIMIZERS, OPTIMIZERS_8BIT, PRECISIONS, Plan, lora_params
from stethoscope.debug.estimate.shape import ModelShape

# Per rank: Python (~2.5 KB pickled), numpy (~2.5 KB), torch CPU (5 KB) and CUDA generator states.
RNG_BYTES = 12_000
# Scheduler state, trainer/monitor state, data position, manifest: a few KB of JSON and pickles.
SMALL_STATE_BYTES = 16_000


def per_save(shape: ModelShape | int, plan: Plan, optimizer: bool = True) -> dict[str, int]:
    """Bytes one save writes, by part, over all ranks. `shape` may be a parameter count alone: a full
    fine-tune's save depends on the count only; LoRA adapters' on the layers and widths they attach to."""
    w, _, m, st, _ = PRECISIONS[plan.precision]
    if plan.lora:
        if isinstance(shape, int):
            raise UsageError("--params alone does not say what the LoRA adapters weigh (their size follows the "
                             "layers and widths they attach to): add --layers and --hidden (or give a config.json)")
        trainable, weights, master, state_bytes = lora_params(shape, plan), lora_params(shape, plan) * 4, 0, 4
    else:
        n = shape if isinstance(shape, int) else shape.params
        trainable, weights, master, state_bytes = n, n * w, m, st
    opt = plan.optimizer
    per_param = OPTIMIZERS_8BIT[opt] if opt in OPTIMIZERS_8BIT else OPTIMIZERS[opt] * state_bytes
    parts = {"weights": weights,
             "optimizer": int(trainable * (per_param + master)) if optimizer else 0,
             "rng": RNG_BYTES * plan.gpus,
             "scheduler_and_state": SMALL_STATE_BYTES}
    return parts


def retention(per_save_bytes: int, steps: int, every: int, keep_last: int | None, milestones_every: int | None,
              keep_best: bool = False) -> dict[str, Any]:
    """Saves over `steps`, how many stay at the end, and the most on disk at once (a new save is
    complete before retention removes the oldest). `keep_best` counts one more (the best is older
    than the newest K: the worst case)."""
    for name, value in (("--every", every), ("--steps", steps)):
        if value < 1:
            raise UsageError(f"{name} must be a positive whole number, got {value}")
    for name, value in (("--keep-last", keep_last), ("--milestone-every", milestones_every)):
        if value is not None and value < 1:
            raise UsageError(f"{name} must be a positive whole number, got {value}")
    saves = steps // every
    if keep_last is None:
        kept, peak = saves, saves
    else:
        period = math.lcm(every, milestones_every) if milestones_every else 0

        def kept_after(k: int) -> int:  # checkpoints left once save k (1-based) is done and retention ran
            if k <= 0:
                return 0
            last = min(k, keep_last)
            milestones = (k * every) // period if period else 0
            in_last = milestones - ((k - last) * every) // period if period else 0
            return min(k, last + milestones - in_last + (1 if keep_best else 0))

        kept = kept_after(saves)
        # kept_after only grows by milestones, so the peak is at one of the last saves.
        peak = max((kept_after(k - 1) + 1 for k in range(max(1, saves - keep_last - 1), saves + 1)), default=0)
        peak = max(peak, kept)
    return {"saves": saves, "kept": kept, "peak_kept": peak, "disk_at_end": kept * per_save_bytes,
            "disk_peak": peak * per_save_bytes, "written_total": saves * per_save_bytes}
