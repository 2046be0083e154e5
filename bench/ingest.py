"""Ingest and read-back: Monitor.log → durable in the store, against plain sqlite3 and TensorBoard.

Prints: training-thread µs per logged scalar, durable points/s, read-back time of one 1,000,000-point
series in a fresh process, bytes per point on disk — ours beside a plain sqlite3 `executemany`
baseline and TensorBoard's writer/reader, in the same run.

    python bench/ingest.py [--points 1000000] [--tb-points 100000]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))

from stethoscope import Monitor  # noqa: E402

SCALARS = 10  # per step, as a training loop logs them


def ours(tmp: Path, n_points: int, scalars: int = SCALARS, name: str = "ours") -> dict[str, float]:
    run = tmp / name
    mon = Monitor(run, detect=False, flush_interval=1.0, max_queue=n_points + 1)
    steps = n_points // scalars
    names = [f"m/s{i}" for i in range(scalars - 1)] + ["single/series"]
    rows = [{n: float(s % 97) * 0.5 + i for i, n in enumerate(names)} for s in range(steps)]
    t0 = time.perf_counter()
    for s, row in enumerate(rows):
        mon.log(row, s)
    t_put = time.perf_counter() - t0
    mon.flush(600)
    t_durable = time.perf_counter() - t0
    dropped = mon._recorder.queue.dropped
    mon.close()
    size = sum(f.stat().st_size for f in run.glob("rank-*"))
    return {"put_us_per_scalar": t_put / (steps * scalars) * 1e6, "durable_pts_per_s": steps * scalars / t_durable,
            "bytes_per_point": size / (steps * scalars), "dropped": dropped, "run": str(run)}


def read_back_ours(run: str, name: str) -> float:
    code = ("import sys, time; sys.path.insert(0, %r); t=time.perf_counter();"
            "from stethoscope.store.query import open_run; r=open_run(%r); s, v=r.series(%r);"
            "print(len(s), time.perf_counter()-t)") % (str(SRC), run, name)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return float(out[1]) if int(out[0]) > 0 else float("nan")


def plain_sqlite(tmp: Path, n_points: int) -> dict[str, float]:
    path = tmp / "plain.sqlite"
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    con.execute("CREATE TABLE points (series_id INTEGER, step INTEGER, time REAL, value REAL)")
    con.execute("CREATE INDEX points_series ON points (series_id, step)")
    now = time.time()
    rows = [(i % SCALARS, i // SCALARS, now, float(i)) for i in range(n_points)]
    t0 = time.perf_counter()
    for k in range(0, n_points, 50_000):
        with con:
            con.executemany("INSERT INTO points VALUES (?, ?, ?, ?)", rows[k:k + 50_000])
    elapsed = time.perf_counter() - t0
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    size = path.stat().st_size
    code = ("import sqlite3, time; t=time.perf_counter(); c=sqlite3.connect(%r);"
            "r=c.execute('SELECT step, value FROM points WHERE series_id=9 ORDER BY step').fetchall();"
            "print(time.perf_counter()-t)") % str(path)
    read = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    return {"durable_pts_per_s": n_points / elapsed, "bytes_per_point": size / n_points,
            "read_s_per_1M": read * 1_000_000 / (n_points / SCALARS)}


def tensorboard(tmp: Path, n_points: int) -> dict[str, float] | None:
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return None
    logdir = tmp / "tb"
    w = SummaryWriter(str(logdir))
    t0 = time.perf_counter()
    for i in range(n_points):
        w.add_scalar(f"m/s{i % SCALARS}", float(i), i // SCALARS)
    t_put = time.perf_counter() - t0
    w.flush()
    w.close()
    elapsed = time.perf_counter() - t0
    size = sum(f.stat().st_size for f in logdir.rglob("*") if f.is_file())
    t0 = time.perf_counter()
    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0})
    acc.Reload()
    got = len(acc.Scalars("m/s9"))
    read = time.perf_counter() - t0
    return {"put_us_per_scalar": t_put / n_points * 1e6, "durable_pts_per_s": n_points / elapsed,
            "bytes_per_point": size / n_points, "read_s_per_1M": read * 1_000_000 / max(got, 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=1_000_000, help="points through the Monitor (10 per step)")
    ap.add_argument("--tb-points", type=int, default=100_000, help="points through TensorBoard (slow)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        o = ours(tmp, args.points)
        one = ours(tmp, 1_000_000, scalars=1, name="one_series")
        o["read_1M_s"] = read_back_ours(one["run"], "single/series")
        p = plain_sqlite(tmp, args.points)
        tb = tensorboard(tmp, args.tb_points)
    series_len = 1_000_000
    print(f"ingest: {args.points:,} points (10 scalars/step); read-back: one series of {series_len:,} points "
          f"({one['bytes_per_point']:.1f} B/pt on disk)")
    print(f"{'':26s} {'µs/scalar (put)':>16s} {'durable pts/s':>14s} {'read 1M pts s':>14s} {'bytes/pt':>9s}")
    print(f"{'stethoscope Monitor':26s} {o['put_us_per_scalar']:16.2f} {o['durable_pts_per_s']:14,.0f} "
          f"{o['read_1M_s'] * 1_000_000 / series_len:14.3f} {o['bytes_per_point']:9.1f}")
    print(f"{'plain sqlite3 executemany':26s} {'-':>16s} {p['durable_pts_per_s']:14,.0f} "
          f"{p['read_s_per_1M']:14.3f} {p['bytes_per_point']:9.1f}")
    if tb:
        print(f"{'TensorBoard SummaryWriter':26s} {tb['put_us_per_scalar']:16.2f} {tb['durable_pts_per_s']:14,.0f} "
              f"{tb['read_s_per_1M']:14.3f} {tb['bytes_per_point']:9.1f}")
    print(f"\ntargets: put <= 2 µs/scalar: {o['put_us_per_scalar']:.2f}; durable >= 200,000 pts/s: "
          f"{o['durable_pts_per_s']:,.0f}; 1M-point read <= 1 s: {o['read_1M_s'] * 1_000_000 / series_len:.3f} s; "
          f"<= 24 B/pt: {o['bytes_per_point']:.1f}; dropped: {o['dropped']}")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
