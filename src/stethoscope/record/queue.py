"""A bounded, non-blocking hand-off from the training thread to the writer thread."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any


class BoundedQueue:
    """`put` never blocks: when full it drops the item and counts the drop.

    deque.append/popleft are atomic under the GIL, so the training thread takes no lock for a point. A
    batch (`put_batch`: a step's values, one item) weighs its number of points: the bound counts points.
    The writer is woken early (instead of at its next interval) once `wake_at` points are waiting.
    """

    def __init__(self, maxsize: int = 1_000_000, wake_at: int = 20_000) -> None:
        if maxsize <= 0:
            raise ValueError(f"maxsize must be positive, got {maxsize}")
        self.maxsize = maxsize
        self.dropped = 0
        self.wake = threading.Event()
        self._items: deque[Any] = deque()
        self._wake_at = min(wake_at, maxsize)
        # Points a batch holds beyond its one item: added by the putters, taken off by the one thread that
        # drains; each int is written by one side only. No lock (the training thread's hot path): two threads
        # putting batches at the same instant could lose one addition, which loosens the bound by that batch
        # and never loses or blocks a point.
        self._extra_in = 0
        self._extra_out = 0

    def put(self, item: Any) -> bool:
        n = len(self._items) + self._extra_in - self._extra_out
        if n >= self.maxsize:
            self.dropped += 1
            return False
        self._items.append(item)
        if n + 1 == self._wake_at:
            self.wake.set()
        return True

    def put_batch(self, item: Any, weight: int) -> bool:
        """Enqueue one item that holds `weight` points (dropped whole, and counted so, when they do not fit)."""
        n = len(self._items) + self._extra_in - self._extra_out
        if n + weight > self.maxsize:
            self.dropped += weight
            return False
        self._extra_in += weight - 1
        self._items.append(item)
        if n < self._wake_at <= n + weight:
            self.wake.set()
        return True

    def put_control(self, item: Any, wake: bool = True) -> None:
        """Enqueue past the bound: flush markers and lifecycle items must never be dropped. `wake=False`
        leaves it to the writer's next interval: no thread switch on the training thread's path."""
        self._items.append(item)
        if wake:
            self.wake.set()

    def drain(self, limit: int = 100_000) -> list[Any]:
        items = self._items
        out = []
        pop = items.popleft
        for _ in range(min(limit, len(items))):
            out.append(pop())
        return out

    def taken(self, weight: int) -> None:
        """The drainer took out batches holding `weight` - 1 points more than their items (`drain` counted
        each batch as one): `taken(k)` for one batch of k points."""
        self._extra_out += weight - 1

    def __len__(self) -> int:
        return len(self._items) + self._extra_in - self._extra_out
