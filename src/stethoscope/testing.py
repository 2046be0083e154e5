"""Public fakes for the boundaries stethoscope cannot reach in a test: a GPU, a clock, a sink.

Everything else in tests runs for real (SQLite files, threads, subprocesses, torch on CPU).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class FakeDeviceMemory:
    """Stands in for torch.cuda's allocator counters: `devices` maps index → bytes per key.

    `grow_per_sample` adds bytes to "allocated" (and "peak") on every sample, to fake a leak.
    """

    devices: dict[int, dict[str, float]] = field(default_factory=lambda: {
        0: {"allocated": 2.0 * (1 << 30), "reserved": 3.0 * (1 << 30), "peak": 2.5 * (1 << 30),
            "total": 80.0 * (1 << 30)}})
    grow_per_sample: float = 0.0
    samples: int = 0

    def sample(self) -> dict[int, dict[str, float]]:
        self.samples += 1
        for stats in self.devices.values():
            stats["allocated"] += self.grow_per_sample
            stats["peak"] = max(stats["peak"], stats["allocated"])
        return {dev: dict(stats) for dev, stats in self.devices.items()}


class FakeClock:
    """A clock that moves only when told to: `clock()` reads it, `advance(s)` moves it."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def loss_curve(steps: int, start: float = 4.0, floor: float = 1.5, tau: float = 300.0,
               noise: float = 0.02, seed: int = 0) -> list[float]:
    """A healthy exponentially decaying loss with multiplicative noise (seeded)."""
    rng = random.Random(seed)
    return [floor + (start - floor) * math.exp(-s / tau) * (1 + rng.gauss(0, noise)) + rng.gauss(0, noise)
            for s in range(steps)]


def write_curve(path: str, steps: Sequence[int], values: Sequence[float]) -> None:
    """Write a golden curve as plain `step value` lines."""
    with open(path, "w", encoding="utf-8") as f:
        for s, v in zip(steps, values):
            f.write(f"{s} {v!r}\n")


def read_curve(path: str) -> tuple[list[int], list[float]]:
    steps, values = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                s, v = line.split()
                steps.append(int(s))
                values.append(float(v))
    return steps, values
