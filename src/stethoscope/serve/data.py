"""What the dashboard's JSON API answers: a run's curves (downsampled), its findings, alerts and timeline.

Curves are read through `RunReader.series_arrays` (packed chunks: no Python object per point) and thinned
by the report's `downsample` (each bucket's minimum and maximum kept, so a spike survives). A page that
has seen up to step S asks for `after=S` and gets only the newer points, read with one range query per
rank; a rollback (steps written again) changes `version`, and the page reloads the whole curves.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from stethoscope import records as R
from stethoscope.findings import catalogue
from stethoscope.records import Finding
from stethoscope.report.html import Chart, downsample
from stethoscope.store.query import RunReader

MAX_POINTS = 2000  # per line on first paint (two per bucket); a zoomed range asks again
MAX_RANKS = 16  # lines on a per-rank chart
MAX_OTHER = 16  # charts of metrics outside the standard ones
MAX_NEW_ROWS = 20_000  # an `after=` answer bigger than this says `reload` instead
TIMELINE_KINDS = ("checkpoint", "rollback", "checkpoint_loaded")


CHARTS = (
    Chart("loss", "Loss and eval loss", (R.LOSS, R.EVAL_LOSS), wide=True),
    Chart("grad_norm", "Gradient norm (log)", (R.GRAD_NORM,), log_y=True),
    Chart("lr", "Learning rate", (R.LR,)),
    Chart("throughput", "Throughput", (R.TOKENS_PER_S, R.SAMPLES_PER_S)),
    Chart("mfu", "MFU", (R.MFU,)),
    Chart("step_time", "Step time (s)", (R.STEP_TIME, R.DATA_WAIT)),
    Chart("memory", "Memory (GiB)", (R.CUDA_ALLOCATED, R.CUDA_RESERVED, R.CUDA_PEAK, R.CUDA_TOTAL, R.RSS)),
    Chart("loss_scale", "Loss scale (log)", (R.LOSS_SCALE,), log_y=True),
    Chart("gpu", "GPU utilization (NVML, 0–1)", (R.GPU_UTIL, R.GPU_MEM_UTIL)),
    Chart("gpu_temp", "GPU temperature (°C) and power (W)", (R.GPU_TEMP, R.GPU_POWER, R.GPU_POWER_LIMIT)),
    Chart("gpu_throttle", "GPU clocks held down (1 = throttled)",
          (R.GPU_THROTTLE_THERMAL, R.GPU_THROTTLE_POWER, R.GPU_THROTTLE_HW)),
    Chart("gpu_clocks", "GPU clocks (Hz)", (R.GPU_SM_CLOCK, R.GPU_MEM_CLOCK)),
    Chart("gpu_errors", "GPU errors (ECC, rows awaiting a reset, PCIe replays, XID)",
          (R.GPU_ECC_UNCORRECTED, R.GPU_ECC_CORRECTED, R.GPU_ROWS_PENDING, R.GPU_PCIE_REPLAYS, R.GPU_XID)),
)
# Drawn once per rank when the run has more than one (the GPU panel of each rank among them).
RANK_METRICS = (R.LOSS, R.STEP_TIME, R.TOKENS_PER_S, R.GRAD_NORM, R.CUDA_PEAK, R.RSS, R.GPU_UTIL, R.GPU_TEMP,
                R.GPU_POWER)
_DEVICE = re.compile(r"/(?:gpu|cuda)\d+$")


def names_by_rank(reader: RunReader) -> dict[int, list[str]]:
    _, rows = reader.query("SELECT rank, name FROM series ORDER BY rank, id")
    out: dict[int, list[str]] = {}
    for rank, name in rows:
        out.setdefault(rank, []).append(name)
    return out


def charts_for(names: list[str]) -> list[Chart]:
    """The charts with at least one of `names`; other memory/… metrics join the memory chart, and every other
    metric (eval/accuracy, param/norm, …) gets a chart of its own, up to MAX_OTHER of them."""
    charted = {m for c in CHARTS for m in c.metrics}
    devices = {n for n in names if _DEVICE.search(n) and _DEVICE.sub("", n) in charted}  # gpu/temp_c/gpu1
    charted |= devices
    extra_memory = tuple(n for n in names if n.startswith("memory/") and n not in charted)
    out = []
    for c in CHARTS:
        per_device = tuple(sorted(n for n in devices if _DEVICE.sub("", n) in c.metrics))
        # one line per device where the run has them; the plain name (device 0 again) only where it has not
        plain = tuple(m for m in c.metrics if not any(_DEVICE.sub("", n) == m for n in per_device))
        metrics = plain + per_device + (extra_memory if c.id == "memory" else ())
        present = tuple(m for m in metrics if m in names)
        if present:
            out.append(Chart(c.id, c.title, present, c.log_y, c.wide))
    rest = sorted(n for n in names if n not in charted and n not in extra_memory and not n.startswith("stethoscope/"))
    return out + [Chart(f"other-{i}", name, (name,)) for i, name in enumerate(rest[:MAX_OTHER])]


def last_step(reader: RunReader, rank: int | None = None) -> int | None:
    """The newest step of any series of `rank` (the lowest by default)."""
    return reader.last_step(rank)  # the chunks' ends and the tail rows (store/packed.py)


def outcomes(reader: RunReader) -> dict[str, Any]:
    """What compare puts side by side (rank 0's curves, read as arrays: fast on a 1M-step run)."""
    first = reader.ranks[0]

    def values(name: str) -> np.ndarray:
        y = reader.series_arrays(name, first)[1]
        return y[np.isfinite(y)]

    def pick(name: str, how: Any) -> float | None:
        y = values(name)
        return float(how(y)) if len(y) else None

    return {"last_step": last_step(reader), "last_loss": _newest(reader.series_arrays(R.LOSS, first)[1]),
            "min_loss": pick(R.LOSS, np.min),
            "min_eval_loss": pick(R.EVAL_LOSS, np.min), "tokens_per_s": pick(R.TOKENS_PER_S, np.median),
            "step_time_s": pick(R.STEP_TIME, np.median), "mfu": pick(R.MFU, np.median),
            "peak_cuda_gib": pick(R.CUDA_PEAK, np.max), "peak_rss_gib": pick(R.RSS, np.max)}


def _newest(y: np.ndarray) -> float | str | None:
    """The loss at the newest step, as `show` and `compare` print it: a NaN or infinite one is `"nan"`/`"inf"`
    (JSON has no NaN; the last finite loss would tell a diverged run's page a loss it no longer has)."""
    if not len(y):
        return None
    v = float(y[-1])
    return v if np.isfinite(v) else ("nan" if v != v else ("inf" if v > 0 else "-inf"))


def version(reader: RunReader) -> str:
    """Changes when steps already shown were written again (a rollback, a resume): the page reloads."""
    _, rows = reader.query("SELECT (SELECT COUNT(*) FROM points_superseded), "
                           "(SELECT COUNT(*) FROM events WHERE kind IN ('rollback', 'checkpoint_loaded'))")
    return f"{rows[0][0]}.{rows[0][1]}"


def _short(y: np.ndarray) -> np.ndarray:
    """Values to 6 significant digits (what a chart shows; the JSON gets ~3x smaller)."""
    out = y.astype(np.float64, copy=True)
    ok = np.isfinite(out) & (out != 0)
    v = out[ok]
    digits = 5 - np.floor(np.log10(np.abs(v))).astype(np.int64)
    scale = 10.0 ** np.abs(digits)
    out[ok] = np.where(digits >= 0, np.round(v * scale) / scale, np.round(v / scale) * scale)
    return out


def _trace(metric: str, rank: int, x: np.ndarray, y: np.ndarray, max_points: int) -> dict[str, Any]:
    d = downsample(x, y, max_points)
    return {"metric": metric, "rank": rank, "x": d.steps, "y": _short(np.asarray(d.values, np.float64)).tolist(),
            "nonfinite": d.nonfinite_steps, "n": int(len(x))}


def line(reader: RunReader, metric: str, rank: int, max_points: int, lo: int | None = None,
         hi: int | None = None) -> dict[str, Any]:
    """One line of a chart, thinned to `max_points` (min and max per bucket). A series long enough that a
    chunk is no wider than a bucket (about 500k points and up for 2,000 points) is drawn from the packed
    chunks' extremes (no point read); a shorter one, or a zoomed window, from its points."""
    if lo is None and hi is None:
        ext = reader.series_extremes(metric, rank)
        if ext is not None and 4 * ext["chunks"] >= max_points:
            t = _trace(metric, rank, ext["steps"], ext["values"], max_points)
            bad = ext["nonfinite"]
            if len(bad) > max_points:
                bad = bad[np.linspace(0, len(bad) - 1, max_points).astype(np.int64)]
            return {**t, "nonfinite": bad.tolist(), "n": ext["n"], "last": -1 if ext["last"] is None else ext["last"]}
    window = None if lo is None and hi is None else (-(2**62) if lo is None else lo, 2**62 if hi is None else hi)
    x, y = _window(*reader.series_arrays(metric, rank, window), lo, hi)
    return {**_trace(metric, rank, x, y, max_points), "last": int(x[-1]) if len(x) else -1}


def _window(x: np.ndarray, y: np.ndarray, lo: int | None, hi: int | None) -> tuple[np.ndarray, np.ndarray]:
    a = 0 if lo is None else int(np.searchsorted(x, lo, "left"))
    b = len(x) if hi is None else int(np.searchsorted(x, hi, "right"))
    return x[a:b], y[a:b]


def curves(reader: RunReader, max_points: int = MAX_POINTS, lo: int | None = None,
           hi: int | None = None) -> dict[str, Any]:
    """Every chart of the run, each line thinned to `max_points` (within steps lo..hi when given)."""
    names = names_by_rank(reader)
    first = reader.ranks[0]
    main = charts_for(names.get(first, []))
    charts = []
    last = None
    for chart in main:
        traces = [line(reader, metric, first, max_points, lo, hi) for metric in chart.metrics]
        last = max([t["last"] for t in traces if t["last"] >= 0] + ([last] if last is not None else []), default=None)
        charts.append(_chart(chart, traces))
    ranks = [k for k in reader.ranks if names.get(k)][:MAX_RANKS]
    if len(ranks) > 1:
        for metric in RANK_METRICS:
            have = [k for k in ranks if metric in names[k]]
            if len(have) < 2:
                continue
            traces = [line(reader, metric, k, max(200, max_points // 4), lo, hi) for k in have]
            charts.append({"id": f"rank-{metric}", "title": f"{metric} per rank", "log_y": metric == R.GRAD_NORM,
                           "wide": False, "per_rank": True, "traces": traces})
    return {"charts": charts, "last_step": last, "version": version(reader), "ranks": reader.ranks}


def _chart(chart: Chart, traces: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": chart.id, "title": chart.title, "log_y": chart.log_y, "wide": chart.wide, "per_rank": False,
            "traces": traces}


def newer(reader: RunReader, after: int, max_points: int = MAX_POINTS) -> dict[str, Any]:
    """The points after step `after` of every line `curves` draws, by (metric, rank); `reload` when too many."""
    names = names_by_rank(reader)
    first = reader.ranks[0]
    wanted = {(m, first) for c in charts_for(names.get(first, [])) for m in c.metrics}
    ranks = [k for k in reader.ranks if names.get(k)][:MAX_RANKS]
    if len(ranks) > 1:
        wanted |= {(m, k) for m in RANK_METRICS for k in ranks if m in names[k]}
    base = {"version": version(reader), "after": after}
    got: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = {}
    total = 0
    for m, k in sorted(wanted, key=lambda w: (w[1], w[0])):  # arrays from the chunks around the window
        x, y = reader.series_arrays(m, k, window=(after + 1, 2**62))
        keep = x > after
        if keep.any():
            got[(m, k)] = (x[keep], y[keep])
            total += int(keep.sum())
        if total > MAX_NEW_ROWS:
            return {**base, "reload": True}
    traces = [_trace(m, k, xs, ys, max_points) for (m, k), (xs, ys) in got.items()]
    last = max((int(xs[-1]) for xs, _ in got.values()), default=None)
    return {**base, "traces": traces, "last_step": last}


# -- findings, alerts, timeline -----------------------------------------------------------------


def finding_json(f: Finding, key: str) -> dict[str, Any]:
    d = f.to_dict()
    d["id"] = key
    d["charts"] = list(catalogue.charts(f.type))
    d["every_chart"] = catalogue.every_chart(f.type)
    return d


def finding_keys(found: Sequence[Finding]) -> list[str]:
    """A key per finding that stays its own while the list grows: its type and step (and, for a second
    finding of one type at one step, its place among those). The page keeps the one a person clicked
    selected across polls; a list index would hand the selection to whatever finding moved into its place."""
    seen: dict[str, int] = {}
    keys = []
    for f in found:
        base = f"{f.type}@{f.step if f.step is not None else '-'}"
        seen[base] = seen.get(base, 0) + 1
        keys.append(base if seen[base] == 1 else f"{base}#{seen[base]}")
    return keys


def alerts(reader: RunReader) -> list[dict[str, Any]]:
    _, rows = reader.query("SELECT rank, step, time, severity, message, data FROM alerts ORDER BY time, id")
    out = []
    for rank, step, t, severity, message, data in rows:
        extra = _json(data)
        alert = extra.get("alert") if isinstance(extra.get("alert"), dict) else {}
        out.append({"rank": rank, "step": step, "time": t, "severity": severity, "message": message,
                    "status": extra.get("status"), "channel": extra.get("channel"), "kind": alert.get("kind"),
                    "type": alert.get("type"), "cause": alert.get("cause"), "fix": alert.get("fix")})
    return out


def timeline(reader: RunReader) -> list[dict[str, Any]]:
    """Checkpoints saved, rollbacks and resumes (events in the store), in time order."""
    marks = ",".join("?" * len(TIMELINE_KINDS))
    _, rows = reader.query(f"SELECT rank, step, time, kind, severity, message, data FROM events "
                           f"WHERE kind IN ({marks}) ORDER BY time, id", TIMELINE_KINDS)
    return [{"rank": rank, "step": step, "time": t, "kind": kind, "severity": sev, "message": msg, "data": _json(data)}
            for rank, step, t, kind, sev, msg, data in rows]


def _json(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
