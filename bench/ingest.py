"""Ingest and read-back: Monitor.log → durable in the store, against plain sqlite3 and TensorBoard.

Prints: training-thread µs per logged scalar, durable points/s, read-back time of one 1,000,000-point
series in a fresh process, bytes per point on disk — ours beside a plain sqlite3 `executemany`
baseline and TensorBoard's writer/reader, in the same run. Ours twice: with the packed chunks
(store/packed.py, the default) and without them (`RunStore(pack=False)`: rows only, as before), ingest
and read interleaved, medians of `--repeat` rounds.

    python bench/ingest.py [--points 1000000] [--tb-points 100000]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))

from stethoscope import Monitor  # noqa: E402
from stethoscope.store.db import RunStore, rank_path, remove_run  # noqa: E402

SCALARS = 10  # per step, as a training loop logs them


def ours(tmp: Path, n_points: int, scalars: int = SCALARS, name: str = "ours", pack: bool = True) -> dict[str, float]:
    run = tmp / name
    store = RunStore(rank_path(run, 0), pack=pack)
    mon = Monitor(run, detect=False, flush_interval=1.0, max_queue=n_points + 1, store=store)
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


def read_back_ours(run: str, name: str) -> dict[str, float]:
    """In a fresh process: import time, then open + `series_arrays()` (numpy), then open + `series()` (lists)."""
    code = ("import sys, time; sys.path.insert(0, %r); t=time.perf_counter(); import numpy;"
            "from stethoscope.store.query import open_run; t1=time.perf_counter(); r=open_run(%r);"
            "s, v=r.series_arrays(%r); t2=time.perf_counter(); r.close(); r=open_run(%r); s, v=r.series(%r);"
            "t3=time.perf_counter(); print(len(s), t1-t, t2-t1, t3-t2)") % (str(SRC), run, name, run, name)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    if int(out[0]) != 1_000_000:
        raise SystemExit(f"read back {out[0]} points, expected 1,000,000")
    return {"import_s": float(out[1]), "arrays_s": float(out[2]), "lists_s": float(out[3])}


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


def writer_cpu(tmp: Path, rounds: int = 9, n_points: int = 300_000) -> dict[bool, float]:
    """CPU seconds of `RunStore.write_points` alone (the writer thread's work) for `n_points`, packed and
    rows only, interleaved; medians. Steadier than the Monitor's wall-clock rates on a busy machine."""
    rows = [(f"m/s{i % SCALARS}", i // SCALARS, float(i), None) for i in range(n_points)]
    got: dict[bool, list[float]] = {True: [], False: []}
    for k in range(rounds):
        for pack in (True, False) if k % 2 else (False, True):
            store = RunStore(tmp / f"cpu-{pack}-{k}.sqlite", pack=pack)
            t = time.process_time()
            for a in range(0, n_points, 10_000):
                store.write_points(rows[a:a + 10_000])
            got[pack].append(time.process_time() - t)
            store.close()
    return {pack: statistics.median(v) for pack, v in got.items()}


def _median(rounds: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in rounds)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=1_000_000, help="points through the Monitor (10 per step)")
    ap.add_argument("--tb-points", type=int, default=100_000, help="points through TensorBoard (slow)")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved rounds of packed / rows-only")
    args = ap.parse_args()
    rounds: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for k in range(args.repeat):
            for pack in (False, True) if k % 2 == 0 else (True, False):
                tag = f"{'packed' if pack else 'rows'}-{k}"
                o = ours(tmp, args.points, name=f"ours-{tag}", pack=pack)
                one = ours(tmp, 1_000_000, scalars=1, name=f"one-{tag}", pack=pack)
                o.update(read_back_ours(one["run"], "single/series"))
                o["one_bytes_per_point"] = one["bytes_per_point"]
                rounds[pack].append(o)
                remove_run(Path(o["run"]))
                remove_run(Path(one["run"]))
        cpu = writer_cpu(tmp)
        p = plain_sqlite(tmp, args.points)
        tb = tensorboard(tmp, args.tb_points)
    print(f"ingest: {args.points:,} points (10 scalars/step); read-back: one series of 1,000,000 points in a fresh "
          f"process; medians of {args.repeat} interleaved rounds")
    print(f"{'':30s} {'µs/scalar (put)':>16s} {'durable pts/s':>14s} {'1M numpy s':>10s} {'series() s':>11s} "
          f"{'bytes/pt':>9s}")
    for pack, label in ((False, "stethoscope, rows only (before)"), (True, "stethoscope, packed (now)")):
        rs = rounds[pack]
        print(f"{label:30s} {_median(rs, 'put_us_per_scalar'):16.2f} {_median(rs, 'durable_pts_per_s'):14,.0f} "
              f"{_median(rs, 'arrays_s'):10.3f} {_median(rs, 'lists_s'):11.3f} "
              f"{_median(rs, 'bytes_per_point'):9.1f}")
    print(f"{'plain sqlite3 executemany':30s} {'-':>16s} {p['durable_pts_per_s']:14,.0f} "
          f"{p['read_s_per_1M']:10.3f} {'-':>11s} {p['bytes_per_point']:9.1f}")
    if tb:
        print(f"{'TensorBoard SummaryWriter':30s} {tb['put_us_per_scalar']:16.2f} {tb['durable_pts_per_s']:14,.0f} "
              f"{tb['read_s_per_1M']:10.3f} {'-':>11s} {tb['bytes_per_point']:9.1f}")
    now, before = rounds[True], rounds[False]
    print(f"\nread 1M (after the interpreter, numpy and stethoscope are imported: {_median(now, 'import_s'):.3f} s): "
          f"series() as lists {_median(before, 'lists_s'):.3f} s before (rows, the code before packing), "
          f"{_median(now, 'lists_s'):.3f} s now ({_median(before, 'lists_s') / _median(now, 'lists_s'):.1f}x); "
          f"series_arrays() {_median(now, 'arrays_s'):.3f} s (open included); target <= 0.3 s")
    print(f"ingest durable pts/s, packed / rows only: "
          f"{_median(now, 'durable_pts_per_s') / _median(before, 'durable_pts_per_s'):.2f}; "
          f"put µs/scalar: {_median(now, 'put_us_per_scalar'):.2f} vs {_median(before, 'put_us_per_scalar'):.2f}")
    print(f"writer CPU per 300,000 points (write_points alone, medians of 9 interleaved): {cpu[True]:.3f} s packed, "
          f"{cpu[False]:.3f} s rows only ({cpu[True] / cpu[False]:.2f}x)")
    print(f"targets: put <= 2 µs/scalar: {_median(now, 'put_us_per_scalar'):.2f}; durable >= 200,000 pts/s: "
          f"{_median(now, 'durable_pts_per_s'):,.0f}; 1M-point read <= 0.3 s: {_median(now, 'arrays_s'):.3f} s; "
          f"bytes/pt {_median(now, 'bytes_per_point'):.1f} (rows only: {_median(before, 'bytes_per_point'):.1f}); "
          f"dropped: {sum(r['dropped'] for r in now + before)}")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
