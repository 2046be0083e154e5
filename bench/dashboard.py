"""Dashboard on a 1,000,000-step run: API answer times and payload sizes, the 1M-point read, first paint.

Writes the same 1M-step run twice (5 series of 1M points + eval every 500 steps + a few findings): once
as stores are written now (packed chunks, store/packed.py) and once rows only (`RunStore(pack=False)`,
the store before packing: every series read row by row). Then, interleaved, medians of --repeat:
  - /api/curves (every chart, each line thinned to 2,000 points): time and bytes — the page's first data
  - /api/curves?after=… (what a live page polls: the last 100 steps)
  - /api/events and /api/runs
  - RunReader.series(train/loss): 1,000,000 points back as lists
and, when chromium is installed, the time from opening the page to its charts drawn (plotly.js parse
included) in headless Chromium.

    python bench/dashboard.py [--steps 1000000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from stethoscope import records as R  # noqa: E402
from stethoscope.records import Finding  # noqa: E402
from stethoscope.serve.dashboard import App  # noqa: E402
from stethoscope.store.db import RunStore, rank_path  # noqa: E402
from stethoscope.store.query import open_run  # noqa: E402


def write_run(run: Path, steps: int, pack: bool) -> None:
    rng = np.random.default_rng(0)
    s = np.arange(steps)
    loss = 2.0 + 3.0 * np.exp(-s / (steps / 10)) + 0.05 * rng.normal(size=steps)
    spikes = rng.choice(steps, 5, replace=False)
    loss[spikes] += 8.0
    series = {R.LOSS: loss, R.GRAD_NORM: np.abs(1.0 + 0.2 * rng.normal(size=steps)),
              R.LR: np.minimum(1.0, s / 2000) * 3e-4, R.TOKENS_PER_S: 50_000 + 2_000 * rng.normal(size=steps),
              R.STEP_TIME: 0.2 + 0.01 * rng.random(steps)}
    store = RunStore(rank_path(run, 0), pack=pack)
    t0 = time.time()
    try:
        for a in range(0, steps, 50_000):
            batch = [(name, int(k), float(v), t0 + k * 0.2)
                     for name, ys in series.items() for k, v in zip(range(a, a + 50_000), ys[a:a + 50_000])]
            store.write_points(batch)
        store.write_points([(R.EVAL_LOSS, k, float(loss[k]) + 0.1, t0 + k * 0.2) for k in range(0, steps, 500)])
        store.write_findings([Finding("loss_spike", "warning", int(k), f"loss spiked at step {k}", end_step=int(k) + 1,
                                      source="spike") for k in sorted(spikes)])
        store.set_meta({"status": "completed", "config": {"lr": 3e-4}})
    finally:
        store.close()


def timed(fn, *args):
    t = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t, out


def first_paint(app: App, key: str, repeat: int) -> list[tuple[float, float, float]] | None:
    chromium = shutil.which("chromium")
    if chromium is None:
        return None
    from playwright.sync_api import sync_playwright

    from stethoscope.serve.http import Server

    server = Server(app)
    server.start()
    times = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            for _ in range(repeat):
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                t = time.perf_counter()
                page.goto(server.url + f"#run={key}")
                page.wait_for_function("document.body.dataset.points > 0", timeout=120_000)
                total = time.perf_counter() - t
                script, drawn = page.evaluate("() => ['sd-script', 'sd-drawn'].map("
                                              "n => performance.getEntriesByName(n)[0].startTime / 1000)")
                times.append((total, script, drawn))
                page.close()
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        runs = {"packed": tmp / "packed", "rows": tmp / "rows"}
        for label, run in runs.items():
            t, _ = timed(write_run, run, args.steps, label == "packed")
            print(f"wrote {label}: {args.steps:,} steps, 5 series of {args.steps:,} points in {t:.1f} s, "
                  f"{sum(f.stat().st_size for f in run.glob('rank-*')) / 2**20:,.0f} MiB")
        app = App(list(runs.values()))
        last = args.steps - 1
        rows: dict[str, dict[str, list[float]]] = {k: {} for k in runs}
        sizes: dict[str, dict[str, int]] = {k: {} for k in runs}
        asks = {"curves (first data)": "/api/curves", "curves after= (poll)": "/api/curves",
                "events": "/api/events", "runs list": "/api/runs", "summary (compare)": "/api/summary"}
        for k in range(args.repeat):
            for label in (("packed", "rows") if k % 2 == 0 else ("rows", "packed")):
                query = {"curves (first data)": f"run={label}", "curves after= (poll)": f"run={label}&after={last - 100}",
                         "events": f"run={label}", "runs list": "", "summary (compare)": f"run={label}"}
                for name, path in asks.items():
                    t, (status, _, body) = timed(app.handle, "GET", path, query[name])
                    assert status == 200, body[:200]
                    rows[label].setdefault(name, []).append(t)
                    sizes[label][name] = len(body)
                with open_run(runs[label]) as reader:
                    t, (steps, _) = timed(reader.series, R.LOSS)
                    assert len(steps) == args.steps
                rows[label].setdefault(f"series(): {args.steps // 1000:,}k pts, lists", []).append(t)
                with open_run(runs[label]) as reader:
                    t, _ = timed(reader.series_arrays, R.LOSS)
                rows[label].setdefault(f"series_arrays(): {args.steps // 1000:,}k, numpy", []).append(t)
        print(f"\n{args.steps:,}-step run; medians of {args.repeat} interleaved rounds; load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        print(f"{'':32s} {'rows only (before)':>20s} {'packed (now)':>14s} {'ratio':>7s} {'bytes':>10s}")
        for name in rows["packed"]:
            before, now = statistics.median(rows["rows"][name]), statistics.median(rows["packed"][name])
            size = sizes["packed"].get(name)
            print(f"{name:32s} {before:19.3f}s {now:13.3f}s {before / now:6.1f}x "
                  f"{'' if size is None else f'{size:,}':>10s}")
        paint = first_paint(app, "packed", min(args.repeat, 3))
        if paint is None:
            print("\nfirst paint in a browser: skipped (no chromium on PATH)")
        else:
            med = [statistics.median(p[i] for p in paint) for i in range(3)]
            print(f"\nfirst paint in headless Chromium, medians of {len(paint)}: page open → charts drawn {med[0]:.2f} s; "
                  f"of which loading and parsing plotly.js (4.8 MB) until our script runs {med[1]:.2f} s, then runs "
                  f"list + curves fetched and {len(app.runs()) and 'all'} charts drawn {med[2] - med[1]:.2f} s")
        now = statistics.median(rows["packed"]["curves (first data)"])
        print(f"target: the 1M-step run's charts' data answered in <= 1 s: {now:.3f} s "
              f"({sizes['packed']['curves (first data)'] / 1024:,.0f} KiB)")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
