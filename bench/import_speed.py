"""Import speed of the two big foreign formats (target: ≤ 2.5 s each for 1,000,000 steps on this machine).

Generates, in a temp dir, a 1,000,000-iteration Megatron-DeepSpeed log (BLOOM's line shape, with the
`[default7]:` rank prefix, a `time (ms)` line every 1000 iterations, an OVERFLOW line now and then)
and a 1,000,000-row trainer_state.json written the way the HF Trainer writes it (indent=2,
sort_keys), then times `read_any` on each in a fresh process (the median of --repeats runs).

    python bench/import_speed.py [--steps 1000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
_CHILD = """
import sys, time
from pathlib import Path
from stethoscope.importers import read_any
t0 = time.perf_counter()
(run,) = read_any(Path(sys.argv[1]))
print(time.perf_counter() - t0, len(run.points), run.steps)
"""


def megatron(path: Path, steps: int) -> int:
    rng = random.Random(1)
    lines = 0
    with path.open("w") as f:
        for s in range(1, steps + 1):
            f.write(f"[default7]: iteration {s:8d}/ {steps:8d} | consumed samples: {s * 2048:12d} | consumed tokens: "
                    f"{s * 2048 * 2048:14d} | elapsed time per iteration (s): {105 + rng.random():.2f} | learning rate: "
                    f"{6e-5 * (1 - s / steps / 2):.3E} | global batch size:  2048 | lm loss: {2 + rng.random():.6E} | "
                    f"grad norm: {0.1 + rng.random():.3f} | num zeros: 0.0 | number of skipped iterations:   0 | "
                    f"number of nan iterations:   0 | samples per second: {19 + rng.random():.3f} | TFLOPs: "
                    f"{147 + rng.random():.2f} |\n")
            lines += 1
            if s % 1000 == 0:
                f.write("[default7]:time (ms)\n")
                lines += 1
            if s % 50_000 == 0:
                f.write("[2022-01-19 13:09:13,305] [INFO] [stage_1_and_2.py:1644:step] [deepscale] OVERFLOW! Rank 0 "
                        "Skipping step. Attempted loss scale: 65536.0, reducing to 32768.0\n")
                lines += 1
    return lines


def trainer_state(path: Path, steps: int) -> int:
    rng = random.Random(0)
    rows = [{"epoch": round(s / steps * 3, 4), "grad_norm": 0.3 + rng.random() * 0.05,
             "learning_rate": 3e-4 * (1 - s / steps), "loss": round(2 + rng.random(), 4), "step": s}
            for s in range(1, steps + 1)]
    state = {"best_metric": None, "epoch": 3.0, "global_step": steps, "log_history": rows, "logging_steps": 1,
             "max_steps": steps, "num_train_epochs": 3, "train_batch_size": 8}
    path.write_text(json.dumps(state, indent=2, sort_keys=True))
    return steps


def time_import(path: Path, repeats: int) -> tuple[float, int, int]:
    env = dict(os.environ, PYTHONPATH=str(SRC))
    runs = []
    for _ in range(repeats):
        out = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, env=env,
                             check=True)
        seconds, points, steps = out.stdout.split()
        runs.append((float(seconds), int(points), int(steps)))
    seconds = statistics.median(r[0] for r in runs)
    return seconds, runs[0][1], runs[0][2]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        print(f"import of {args.steps:,}-step logs (median of {args.repeats}, fresh process each; target <= 2.5 s)")
        for name, make in {"megatron.log": megatron, "trainer_state.json": trainer_state}.items():
            path = Path(d) / name
            t0 = time.perf_counter()
            lines = make(path, args.steps)
            made = time.perf_counter() - t0
            seconds, points, steps = time_import(path, args.repeats)
            print(f"  {name:20s} {path.stat().st_size / 2**20:7.1f} MiB  {seconds:6.2f} s  "
                  f"{lines / seconds:>12,.0f} lines|rows/s  {points / seconds:>12,.0f} points/s  "
                  f"({points:,} points, {steps:,} steps; generated in {made:.0f} s)")


if __name__ == "__main__":
    main()
