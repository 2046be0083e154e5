"""The one-screen summary of a run that `stethoscope show` and `runs` print."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from stethoscope import records as R
from stethoscope.store.query import RunReader

if TYPE_CHECKING:
    import numpy as np


def _meta_value(meta: dict[str, str], key: str) -> Any:
    raw = meta.get(key)
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def summarize(reader: RunReader) -> dict[str, Any]:
    """Last step and logged steps, losses, throughput, memory, findings and timing of a run (rank 0 for the curves).
    Each series is read as arrays (store/packed.py), never point by point through SQL."""
    meta = reader.meta()
    rank = reader.ranks[0]
    loss = _values(reader, rank, R.LOSS)
    findings = dict(reader.query("SELECT severity, COUNT(*) FROM findings GROUP BY severity")[1])
    start, end = _number(_meta_value(meta, "start_time")), _number(_meta_value(meta, "end_time"))
    last_time = reader.last_time(rank)
    logged = _logged_steps(reader, rank)  # steps with any record, as `diagnose` and `report` count them
    return {
        "run": str(reader.path),
        "status": _meta_value(meta, "status"),
        "ranks": len(reader.ranks),
        "steps": logged,  # kept for scripts written before logged_steps; the same number
        "logged_steps": logged,  # steps with a record (a run logging every 10th step of 2,000 has 200)
        "last_step": reader.last_step(rank),
        "last_loss": _last(loss),
        "min_loss": _extreme(loss[1], min),
        "min_eval_loss": _extreme(_values(reader, rank, R.EVAL_LOSS)[1], min),
        "tokens_per_s": _median(reader, rank, R.TOKENS_PER_S),
        "step_time_s": _median(reader, rank, R.STEP_TIME),
        "mfu": _median(reader, rank, R.MFU),
        "peak_rss_gib": _extreme(_values(reader, rank, R.RSS)[1], max),
        "peak_cuda_gib": _extreme(_values(reader, rank, R.CUDA_PEAK)[1], max),
        "findings": {sev: findings.get(sev, 0) for sev in R.SEVERITIES},
        "start_time": start,
        "duration_s": (end or last_time) - start if start and (end or last_time) else None,
    }


def _values(reader: RunReader, rank: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    return reader.series_arrays(name, rank)


def _last(series: tuple[np.ndarray, np.ndarray]) -> float | None:
    """The value at the newest step (None for NaN, as SQL gives it)."""
    if not len(series[0]):
        return None
    v = float(series[1][-1])
    return None if v != v else v


def _extreme(values: np.ndarray, fn: Any) -> float | None:
    """SQL's MIN/MAX (`fn` min or max): NaN (NULL) left out; None when nothing is left."""
    kept = _kept(values)
    if not len(kept):
        return None
    return float(kept.min() if fn is min else kept.max())


def _logged_steps(reader: RunReader, rank: int) -> int | None:
    """How many distinct steps any series of `rank` has (None when there is none)."""
    import numpy as np

    _, names = reader.query("SELECT name FROM series WHERE rank = ?", (rank,))
    steps = [reader.series_arrays(name, rank)[0] for (name,) in names]
    if not steps:
        return None
    x = np.sort(np.concatenate(steps))
    return int(len(x) and 1 + np.count_nonzero(x[1:] != x[:-1])) or None


def _number(value: Any) -> float | None:
    """A meta value that should be a number, or None when the store holds something else."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
        return float(value)
    return None


def _median(reader: RunReader, rank: int, name: str) -> float | None:
    """The value SQL's `ORDER BY value` puts in the middle (NaN left out)."""
    values = _kept(_values(reader, rank, name)[1])
    values.sort()
    return float(values[len(values) // 2]) if len(values) else None


def _kept(values: np.ndarray) -> np.ndarray:
    return values[values == values]  # NaN (SQL's NULL) left out
