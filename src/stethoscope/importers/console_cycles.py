"""Cycles of line shapes in a console log: a header line that carries the step, then record lines of that
step, one metric each (Composer's `[batch=N/T]:` blocks), repeated. `ConsoleReader._cycles` reads such a
stretch a cycle position at a time by the shapes' token plans."""

from __future__ import annotations

from typing import Any

MAX_PERIOD = 8  # the longest cycle of shapes read as one
MIN_CYCLES = 16  # fewer cycles: line by line costs less than finding them


def find_cycle(runs: list[tuple[bytes, int, int]], at: int, templates: dict[bytes, Any]) -> tuple[int, int] | None:
    """(period, cycles) when the lines from `at` repeat a cycle of shapes, one line each, that opens
    with a line carrying the step and goes on with record lines of that step (Composer's
    `[batch=N/T]:` header and one metric per line), all known with token plans; else None."""
    if runs[at][2] - runs[at][1] != 1:
        return None
    head = templates.get(runs[at][0])
    if head is None or head.plan is None or not head.own_step or head.bar or b"\r" in runs[at][0]:
        return None
    for period in range(2, MAX_PERIOD + 1):
        if at + period * MIN_CYCLES > len(runs) or runs[at + period][0] != runs[at][0]:
            continue
        shapes = [r[0] for r in runs[at: at + period]]
        known = [templates.get(shape) for shape in shapes[1:]]
        if any(k is None or k.plan is None or k.own_step or k.bar or k.plan.time is not None
               or k.plan.rank is not None for k in known) or any(b"\r" in shape for shape in shapes):
            continue
        n = at
        while n < len(runs) and runs[n][0] == shapes[(n - at) % period] and runs[n][2] - runs[n][1] == 1:
            n += 1
        cycles = (n - at) // period
        return (period, cycles) if cycles >= MIN_CYCLES else None
    return None
