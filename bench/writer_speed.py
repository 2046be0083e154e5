"""The writer thread's detector cost per training step, two source trees side by side (issue 28.2).

    python bench/writer_speed.py --before /path/to/other/src [--after src] [--rounds 5] [--steps 6000]

What the writer thread does for every recorded step: `LiveDetection.observe` (points -> step records ->
`DetectorSet.update`, every detector). Fed here with bench/detect_speed.py's healthy run (15 values a
record: loss, LR, grad norm, clip, param norm, update ratio, loss scale, step time, tokens/s, data wait,
memory; an eval every 500 steps), in batches of 8 steps as the writer drains its queue. Each round runs
one fresh process per tree, the trees alternating (A B B A ...); a process times the whole stream
twice and keeps its best (CPU time of the process, so another process on a busy machine does not
count). Prints us per step for each tree (median over rounds) and the median of the per-round ratios
after/before. No finding is printed: identity of the findings is checked elsewhere (notes/writer-speed.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from stethoscope.detect.live import LiveDetection  # first: detect_speed puts this checkout's src/ first
sys.path.insert(0, sys.argv[2])
import detect_speed
recs = detect_speed.synthetic_records(int(sys.argv[3]))
batch = []
for r in recs:
    batch.extend((k, r.step, v, None) for k, v in r.values.items())
chunks = [batch[i:i + 8 * 15] for i in range(0, len(batch), 8 * 15)]
best = float("inf")
for _ in range(2):
    ld = LiveDetection()
    t0 = time.process_time()
    for c in chunks:
        ld.observe(c)
    ld.finish()
    best = min(best, time.process_time() - t0)
import os, stethoscope
print(json.dumps({"us_per_step": best / len(recs) * 1e6, "src": os.path.dirname(os.path.dirname(stethoscope.__file__))}))
"""


def one(src: Path, steps: int) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", _CHILD, str(src), str(REPO / "bench"), str(steps)],
                         capture_output=True, text=True, env=env, check=True).stdout
    row = json.loads(out.strip().splitlines()[-1])
    if Path(row["src"]).resolve() != src.resolve():
        raise SystemExit(f"{src}: imported stethoscope from {row['src']}")
    return float(row["us_per_step"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, required=True, help="the src/ folder of the tree to compare against")
    ap.add_argument("--after", type=Path, default=REPO / "src")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=6000)
    args = ap.parse_args()
    before, after, ratios = [], [], []
    for i in range(args.rounds):
        pair = [(args.before, before), (args.after, after)]
        for src, into in (pair if i % 2 == 0 else pair[::-1]):
            into.append(one(src, args.steps))
        ratios.append(after[-1] / before[-1])
        print(f"round {i}: before {before[-1]:.1f} us/step, after {after[-1]:.1f} us/step, "
              f"after/before {ratios[-1]:.3f}", flush=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\nLiveDetection.observe, {args.steps} healthy steps of 15 values, CPU time, best of 2 a process, "
          f"{args.rounds} rounds alternating (load {load:.1f}):")
    print(f"  before {statistics.median(before):.1f} us/step  after {statistics.median(after):.1f} us/step  "
          f"after/before x{statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}]")


if __name__ == "__main__":
    main()
