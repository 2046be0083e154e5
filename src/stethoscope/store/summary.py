"""The one-screen summary of a run that `stethoscope show` and `runs` print."""

from __future__ import annotations

import json
from typing import Any

from stethoscope import records as R
from stethoscope.store.query import RunReader


def _scalar(reader: RunReader, sql: str, params: tuple[Any, ...] = ()) -> Any:
    _, rows = reader.query(sql, params)
    return rows[0][0] if rows else None


def _meta_value(meta: dict[str, str], key: str) -> Any:
    raw = meta.get(key)
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def summarize(reader: RunReader) -> dict[str, Any]:
    """Last step and logged steps, losses, throughput, memory, findings and timing of a run (rank 0 for the curves)."""
    meta = reader.meta()
    rank = reader.ranks[0]
    one = "SELECT {agg} FROM metrics WHERE rank = ? AND name = ?"
    last_loss = _scalar(reader, "SELECT value FROM metrics WHERE rank = ? AND name = ? ORDER BY step DESC LIMIT 1",
                        (rank, R.LOSS))
    findings = dict(reader.query("SELECT severity, COUNT(*) FROM findings GROUP BY severity")[1])
    start, end = _number(_meta_value(meta, "start_time")), _number(_meta_value(meta, "end_time"))
    last_time = _scalar(reader, "SELECT MAX(time) FROM metrics WHERE rank = ?", (rank,))
    logged = (_scalar(reader, "SELECT COUNT(DISTINCT step) FROM metrics WHERE rank = ? AND name = ?", (rank, R.LOSS))
              or _scalar(reader, "SELECT COUNT(DISTINCT step) FROM metrics WHERE rank = ?", (rank,)))
    return {
        "run": str(reader.path),
        "status": _meta_value(meta, "status"),
        "ranks": len(reader.ranks),
        "steps": logged,  # kept for scripts written before logged_steps; the same number
        "logged_steps": logged,  # steps with a record (a run logging every 10th step of 2,000 has 200)
        "last_step": _scalar(reader, "SELECT MAX(step) FROM metrics WHERE rank = ?", (rank,)),
        "last_loss": last_loss,
        "min_loss": _scalar(reader, one.format(agg="MIN(value)"), (rank, R.LOSS)),
        "min_eval_loss": _scalar(reader, one.format(agg="MIN(value)"), (rank, R.EVAL_LOSS)),
        "tokens_per_s": _median(reader, rank, R.TOKENS_PER_S),
        "step_time_s": _median(reader, rank, R.STEP_TIME),
        "mfu": _median(reader, rank, R.MFU),
        "peak_rss_gib": _scalar(reader, one.format(agg="MAX(value)"), (rank, R.RSS)),
        "peak_cuda_gib": _scalar(reader, one.format(agg="MAX(value)"), (rank, R.CUDA_PEAK)),
        "findings": {sev: findings.get(sev, 0) for sev in R.SEVERITIES},
        "start_time": start,
        "duration_s": (end or last_time) - start if start and (end or last_time) else None,
    }


def _number(value: Any) -> float | None:
    """A meta value that should be a number, or None when the store holds something else."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
        return float(value)
    return None


def _median(reader: RunReader, rank: int, name: str) -> float | None:
    _, rows = reader.query("SELECT value FROM metrics WHERE rank = ? AND name = ? AND value IS NOT NULL "
                           "ORDER BY value", (rank, name))
    return rows[len(rows) // 2][0] if rows else None
