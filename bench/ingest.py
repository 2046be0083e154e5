"""Ingest and read-back of the store, before and after storing each point once (issue 28.3), beside a plain
sqlite3 `executemany` of (step, name, value) rows — all in one run, interleaved rounds, medians.

Each measurement runs in a fresh process on a chosen source tree: this checkout, and `--before SRC` (e.g. the
tree before the change: `git archive <commit> src | tar -x -C /tmp/before`). Prints bytes per point,
durable points/s through `Monitor.log` as a ratio to the plain sqlite3 rows measured in the same round, and
the time to read one 1,000,000-point series (`series_arrays`, open included) in a fresh process.

    python bench/ingest.py [--points 1000000] [--repeat 3] [--before /tmp/before/src]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
SCALARS = 10  # per step, as a training loop logs them

WORKER = r"""
import json, sqlite3, sys, time
from pathlib import Path
src, what, d, n = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
sys.path.insert(0, src)
out = {}
if what == "plain":
    con = sqlite3.connect(d / "plain.sqlite")
    con.execute("PRAGMA journal_mode=WAL"); con.execute("PRAGMA synchronous=NORMAL")
    con.execute("CREATE TABLE points (step INTEGER, name TEXT, value REAL)")
    rows = [(i // 10, f"m/s{i % 10}", float(i)) for i in range(n)]
    t = time.perf_counter()
    for k in range(0, n, 50_000):
        with con:
            con.executemany("INSERT INTO points VALUES (?, ?, ?)", rows[k:k + 50_000])
    out["pts_per_s"] = n / (time.perf_counter() - t)
elif what == "ingest":
    from stethoscope import Monitor
    scalars = int(sys.argv[5])
    mon = Monitor(d / "run", detect=False, flush_interval=1.0, max_queue=n + 1)
    names = [f"m/s{i}" for i in range(scalars)]
    rows = [{k: float(s % 97) * 0.5 + i for i, k in enumerate(names)} for s in range(n // scalars)]
    t = time.perf_counter()
    for s, row in enumerate(rows):
        mon.log(row, s)
    mon.flush(600)
    out["pts_per_s"] = n / (time.perf_counter() - t)
    mon.close()
    out["bytes_per_point"] = sum(f.stat().st_size for f in (d / "run").glob("rank-*")) / n
else:  # read: one series of the run written by "ingest" with scalars=1
    import numpy
    from stethoscope.store.query import open_run
    t = time.perf_counter()
    r = open_run(d / "run")
    x, y = r.series_arrays("m/s0")
    out["read_s"] = time.perf_counter() - t
    assert len(x) == n, len(x)
print(json.dumps(out))
"""


def _run(src: Path, what: str, d: Path, n: int, *extra: str) -> dict[str, float]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    res = subprocess.run([sys.executable, "-c", WORKER, str(src), what, str(d), str(n), *extra],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def round_of(src: Path, tmp: Path, n: int, n_read: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(dir=tmp) as a, tempfile.TemporaryDirectory(dir=tmp) as b, \
            tempfile.TemporaryDirectory(dir=tmp) as c:
        plain = _run(src, "plain", Path(a), n)["pts_per_s"]
        ours = _run(src, "ingest", Path(b), n, str(SCALARS))
        _run(src, "ingest", Path(c), n_read, "1")
        read = _run(src, "read", Path(c), n_read)["read_s"]
    return {"ratio": ours["pts_per_s"] / plain, "pts_per_s": ours["pts_per_s"], "plain": plain,
            "bytes_per_point": ours["bytes_per_point"], "read_s": read}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=1_000_000, help="points through Monitor.log (10 per step)")
    ap.add_argument("--read-points", type=int, default=1_000_000, help="points of the one series read back")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--before", type=Path, help="the src/ of the tree to compare with")
    args = ap.parse_args()
    trees = {"now": SRC} if args.before is None else {"before": args.before, "now": SRC}
    got: dict[str, list[dict[str, float]]] = {k: [] for k in trees}
    with tempfile.TemporaryDirectory() as d:
        for k in range(args.repeat):
            for label in (list(trees) if k % 2 == 0 else list(trees)[::-1]):
                got[label].append(round_of(trees[label], Path(d), args.points, args.read_points))
    print(f"{args.points:,} points through Monitor.log ({SCALARS} per step); one {args.read_points:,}-point series "
          f"read in a fresh process; medians of {args.repeat} interleaved rounds")
    print(f"{'':8s} {'vs plain sqlite3 rows':>22s} {'pts/s':>11s} {'plain pts/s':>12s} {'bytes/pt':>9s} {'1M read s':>10s}")
    for label, rounds in got.items():
        med = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
        print(f"{label:8s} {med['ratio']:22.2f} {med['pts_per_s']:11,.0f} {med['plain']:12,.0f} "
              f"{med['bytes_per_point']:9.1f} {med['read_s']:10.3f}")
    print("targets: >= 1.5x plain sqlite3 rows, <= 12 bytes/point, 1M-point read <= 0.05 s")


if __name__ == "__main__":
    main()
