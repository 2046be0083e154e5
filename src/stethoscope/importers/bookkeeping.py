"""A trainer's progress bookkeeping, written beside its metrics or instead of them.

LLaMA-Factory's `trainer_log.jsonl` carries `current_steps`, `total_steps`, `percentage`, `elapsed_time` and
`remaining_time` on every line, and a loss only when training logged one: a predict or eval-only launch writes
the progress alone. How far a run has got is no measure of how it learns: such keys are not stored as series, and
a file that holds nothing else is refused (as a results summary is) rather than read as `percentage` over steps.
"""

from __future__ import annotations

from pathlib import Path

from stethoscope.errors import InputError

# Where a run is, not how it does (the step key itself, `current_steps`, is taken before these are looked at).
PROGRESS_KEYS = frozenset({"percentage", "total_steps", "total_step", "max_steps", "remaining_time", "elapsed_time",
                           "current_steps", "eta"})


def is_progress(key: str) -> bool:
    """Whether `key` (a record's key, as written) is progress bookkeeping."""
    return key.strip().lower() in PROGRESS_KEYS


def refuse_progress_only(path: Path, records: int, keys: set[str]) -> None:
    """Refuse a file of `records` records whose only numeric keys (`keys`) are progress bookkeeping."""
    if records and keys and all(is_progress(k) for k in keys):
        raise InputError(path, f"no training metric (progress only): {records} records of "
                               f"{', '.join(sorted(keys))}; expected a loss or another measure beside them")
