"""Which rank this process is, without importing torch when the user has not."""

from __future__ import annotations

import sys

from stethoscope.config import env_rank


def rank_and_world() -> tuple[int, int]:
    """torch.distributed's rank and world size when a process group is up, else the launcher's env."""
    torch = sys.modules.get("torch")
    if torch is not None:
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    return env_rank()
