"""Garbage collection at the same step on every rank.

Python's automatic collector runs when allocation counts cross a threshold, at a different moment on
each rank: one rank pauses while the others wait for it in the next collective, and the pauses add up
across ranks. `SyncedGC` turns the automatic collector off and collects every `every` steps instead —
the same step everywhere, so the pauses overlap.

    sgc = SyncedGC(every=500)
    for step in ...:
        ...
        sgc.step(step)
    sgc.close()   # the automatic collector back on
"""

from __future__ import annotations

import gc
import time


class SyncedGC:
    def __init__(self, every: int = 500, generation: int = 1, full_every: int = 0) -> None:
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self.every, self.generation, self.full_every = every, generation, full_every
        self.collections = 0
        self.pause_s = 0.0
        self._was_enabled = gc.isenabled()
        gc.disable()

    def step(self, step: int) -> bool:
        """Collect when `step` is a multiple of `every` (a full collection every `full_every` steps); True if it did."""
        if step <= 0 or step % self.every:
            return False
        full = self.full_every and step % self.full_every == 0
        t0 = time.perf_counter()
        gc.collect(2 if full else self.generation)
        self.pause_s += time.perf_counter() - t0
        self.collections += 1
        return True

    def close(self) -> None:
        if self._was_enabled:
            gc.enable()

    def __enter__(self) -> SyncedGC:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
