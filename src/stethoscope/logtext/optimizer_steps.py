"""Which of two counters a record prints is the step: an iteration counter that runs k times faster than the
optimizer step named beside it (LitGPT's `iter 400 step 100`: `iter` counts micro-batches, k a step under gradient
accumulation) is not the step when every record is its own optimizer step; the named step is, and the lines that
count iterations only (LitGPT's `iter 400: val loss ..`) are at their iteration over k. When the named step repeats
(lit-gpt's adapter scripts print every micro-batch: `iter 1 step 0`, `iter 2 step 0`), each iteration is a record
and the iteration stays the step."""

from __future__ import annotations

from stethoscope.logtext.columns import Columns


def named_steps(columns: Columns, name: str, iter_lines: set[int] = frozenset(),
                step_lines: set[int] = frozenset()) -> Columns:
    """`columns` in optimizer steps when the points named `name` (the step each record names) rise record by record
    and each record's step read (its iteration) is k times it (k > 1, the same for all): the points at a record's
    iteration or at one of `iter_lines` (eval lines counting iterations) move to it over k, the eval points at
    `step_lines` (eval lines that name the optimizer step) stay. Else, or when an eval's step is both, `columns`
    as they are."""
    pairs = [(s, int(v)) for n, s, v in zip(columns.names, columns.steps, columns.values) if n == name]
    k = _ratio(pairs)
    iterations = {s for s, _ in pairs} | set(iter_lines)
    if k is None or set(iter_lines) & set(step_lines) or any(s % k for s in iterations):
        return columns
    kept = [i for i, n in enumerate(columns.names) if n != name]  # the step itself: no metric
    names, steps = [columns.names[i] for i in kept], [columns.steps[i] for i in kept]
    named = [n.startswith("eval/") and s in step_lines for n, s in zip(names, steps)]
    return Columns(names, [s // k if s in iterations and not e else s for s, e in zip(steps, named)],
                   [columns.values[i] for i in kept], [columns.times[i] for i in kept])


def _ratio(pairs: list[tuple[int, int]]) -> int | None:
    """k when each iteration is k times its record's optimizer step, those steps rising (None otherwise)."""
    if len(pairs) < 2 or any(b <= a for (_, a), (_, b) in zip(pairs, pairs[1:])):
        return None
    first = next(((i, o) for i, o in pairs if o > 0), None)
    if first is None or first[0] % first[1] or first[0] // first[1] < 2:
        return None
    k = first[0] // first[1]
    return k if all(i == k * o for i, o in pairs) else None
