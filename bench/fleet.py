"""Fleet scale: 64 ranks × 100k steps, "which rank was slowest at each step" across all ranks.

Generates the rank stores once (the project's schema through `connect_writable`, bulk SQL inserts: a
recursive CTE, no Python row objects) and their Parquet export, cached in bench/.cache/ (gitignored).
Then times, interleaved, medians of --rounds:

  parquet   DuckDB over the Parquet export (`read_parquet`, Hive partitions), one SQL statement
  sqlite    Python opening the 64 SQLite files one by one (sqlite3 + numpy max/argmax per step):
            what a user writes without us
  stores    `stethoscope query RUN --ranks all` path: DuckDB over the rank stores read into Arrow
            (every point of every rank: timed once, outside the rounds)

and prints the bytes on disk of the stores and of the export. Every answer is checked against the
generator's known slowest rank (rank (step // 1000) % 64 is made 50 ms slower).

    python bench/fleet.py [--ranks 64] [--steps 100000] [--rounds 5] [--reexport --jobs N] [--skip-stores]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import sys
import time
from pathlib import Path

import numpy as np

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))

from stethoscope.store.db import connect_writable, rank_path  # noqa: E402
from stethoscope.store.export import export_runs  # noqa: E402
from stethoscope.store.fleet import FleetQuery, sources  # noqa: E402

CACHE = Path(__file__).resolve().parent / ".cache"
STEP_TIME = "perf/step_time_s"
SERIES = (("train/loss", "nats", "4.0 / (1 + step * 0.001) + (step * 7919 % 100) * 1e-4"),
          (STEP_TIME, "s", "0.25 + ((step * 2654435761 + :rank * 40503) % 1000) * 1e-5 "
                           "+ CASE WHEN (step / 1000) % :ranks = :rank THEN 0.05 ELSE 0 END"),
          ("perf/tokens_per_s", "tokens/s", "500000.0 + (step * 31 + :rank) % 977"))
T0 = 1_763_900_000.0


def generate(run: Path, ranks: int, steps: int) -> float:
    """The rank stores of one run; returns seconds taken (0 when cached)."""
    done = run / ".complete"
    if done.exists():
        return 0.0
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    start = time.perf_counter()
    for rank in range(ranks):
        conn = connect_writable(rank_path(run, rank))
        with conn:
            conn.execute("INSERT INTO run VALUES ('t0', ?), ('schema_version', '1'), ('status', 'completed')",
                         (repr(T0),))
            for sid, (name, unit, expr) in enumerate(SERIES, start=1):
                conn.execute("INSERT INTO series (id, name, unit) VALUES (?, ?, ?)", (sid, name, unit))
                conn.execute(f"WITH RECURSIVE s(step) AS (SELECT 0 UNION ALL SELECT step + 1 FROM s WHERE step < :n) "
                             f"INSERT INTO points SELECT {sid}, step, step * 250 + :rank, {expr} FROM s",
                             {"n": steps - 1, "rank": rank, "ranks": ranks})
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
    done.write_text("")
    return time.perf_counter() - start


def export(run: Path, dest: Path, jobs: int, again: bool) -> float:
    if (dest / ".complete").exists() and not again:
        return 0.0
    shutil.rmtree(dest, ignore_errors=True)
    start = time.perf_counter()
    export_runs([run], dest, jobs=jobs)
    took = time.perf_counter() - start
    (dest / ".complete").write_text("")
    return took


def by_parquet(dest: Path) -> np.ndarray:
    import duckdb

    con = duckdb.connect()
    rows = con.execute(
        f"SELECT step, arg_max(rank, value) FROM read_parquet('{dest}/metrics/**/*.parquet', hive_partitioning = true) "
        f"WHERE name = '{STEP_TIME}' GROUP BY step ORDER BY step").fetchnumpy()
    con.close()
    return rows[next(k for k in rows if k != "step")].astype(np.int64)


def by_sqlite_files(run: Path, steps: int) -> np.ndarray:
    best = np.full(steps, -np.inf)
    who = np.zeros(steps, dtype=np.int64)
    for f in sorted(run.glob("rank-*.sqlite")):
        rank = int(f.stem.split("-")[1])
        conn = sqlite3.connect(f"file:{f}?mode=ro", uri=True)
        rows = conn.execute("SELECT step, value FROM metrics WHERE name = ? ORDER BY step", (STEP_TIME,)).fetchall()
        conn.close()
        step = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        value = np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows))
        slower = value > best[step]
        best[step[slower]] = value[slower]
        who[step[slower]] = rank
    return who


def by_stores(run: Path) -> np.ndarray:
    with FleetQuery(sources([str(run)])) as q:
        _, rows = q.query(f"SELECT step, arg_max(rank, value) FROM metrics WHERE name = '{STEP_TIME}' "
                          "GROUP BY step ORDER BY step")
    return np.array([r[1] for r in rows], dtype=np.int64)


def size(path: Path, pattern: str) -> int:
    return sum(f.stat().st_size for f in path.rglob(pattern) if f.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--skip-stores", action="store_true", help="Leave out the DuckDB-over-rank-stores timing.")
    ap.add_argument("--reexport", action="store_true", help="Export to Parquet again (timed) even when cached.")
    ap.add_argument("--jobs", type=int, default=1, help="Ranks exported at once (export parquet --jobs).")
    args = ap.parse_args()
    run = CACHE / f"fleet-{args.ranks}x{args.steps}"
    dest = CACHE / f"fleet-{args.ranks}x{args.steps}-parquet"
    took = generate(run, args.ranks, args.steps)
    print(f"rank stores: {args.ranks} ranks x {args.steps:,} steps x {len(SERIES)} series = "
          f"{args.ranks * args.steps * len(SERIES):,} points" + (f", generated in {took:.1f} s" if took else " (cached)"))
    took = export(run, dest, args.jobs, args.reexport)
    print("parquet export: " + (f"{took:.1f} s with --jobs {args.jobs}" if took else "(cached)")
          + f"  ({os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f})")
    want = (np.arange(args.steps) // 1000) % args.ranks
    kinds = {"parquet": lambda: by_parquet(dest), "sqlite": lambda: by_sqlite_files(run, args.steps)}
    times: dict[str, list[float]] = {k: [] for k in kinds}
    for k, fn in kinds.items():  # warm the page cache; check every answer
        assert np.array_equal(fn(), want), f"{k}: wrong slowest ranks"
    if not args.skip_stores:  # reads every point of every rank into Arrow: timed once, not in the rounds
        start = time.perf_counter()
        assert np.array_equal(by_stores(run), want), "stores: wrong slowest ranks"
        times["stores"] = [time.perf_counter() - start]
    for _ in range(args.rounds):
        for k, fn in kinds.items():
            start = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - start)
    med = {k: statistics.median(v) for k, v in times.items()}
    stores_bytes, parquet_bytes = size(run, "rank-*.sqlite"), size(dest, "*.parquet")
    metrics_bytes = size(dest / "metrics", "*.parquet")
    print(f"slowest rank per step over {args.ranks} ranks (median of {args.rounds}, interleaved; answers checked):")
    print(f"  DuckDB over Parquet          {med['parquet']:7.3f} s   on disk {parquet_bytes / 2**20:8.1f} MiB "
          f"(metrics {metrics_bytes / 2**20:.1f} MiB)")
    print(f"  SQLite files one by one      {med['sqlite']:7.3f} s   on disk {stores_bytes / 2**20:8.1f} MiB   "
          f"{med['sqlite'] / med['parquet']:.1f}x the Parquet time")
    if "stores" in med:
        print(f"  DuckDB over the rank stores  {med['stores']:7.3f} s   (query RUN --ranks all: every point read "
              f"into Arrow, once) {med['stores'] / med['parquet']:.1f}x")
    print(f"  bytes per point: stores {stores_bytes / (args.ranks * args.steps * len(SERIES)):.1f}, "
          f"parquet {metrics_bytes / (args.ranks * args.steps * len(SERIES)):.1f}")


if __name__ == "__main__":
    main()
