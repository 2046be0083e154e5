"""A bounded, non-blocking hand-off from the training thread to the writer thread."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any


class BoundedQueue:
    """`put` never blocks: when full it drops the item and counts the drop.

    deque.append/popleft are atomic under the GIL, so the training thread takes no lock. The writer
    is woken early (instead of at its next interval) once `wake_at` items are waiting.
    """

    def __init__(self, maxsize: int = 1_000_000, wake_at: int = 20_000) -> None:
        if maxsize <= 0:
            raise ValueError(f"maxsize must be positive, got {maxsize}")
        self.maxsize = maxsize
        self.dropped = 0
        self.wake = threading.Event()
        self._items: deque[Any] = deque()
        self._wake_at = min(wake_at, maxsize)

    def put(self, item: Any) -> bool:
        n = len(self._items)
        if n >= self.maxsize:
            self.dropped += 1
            return False
        self._items.append(item)
        if n + 1 == self._wake_at:
            self.wake.set()
        return True

    def put_control(self, item: Any) -> None:
        """Enqueue past the bound: flush markers and lifecycle items must never be dropped."""
        self._items.append(item)
        self.wake.set()

    def drain(self, limit: int = 100_000) -> list[Any]:
        items = self._items
        out = []
        pop = items.popleft
        for _ in range(min(limit, len(items))):
            out.append(pop())
        return out

    def __len__(self) -> int:
        return len(self._items)
