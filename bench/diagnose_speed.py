"""End-to-end `stethoscope diagnose` on 1,000,000-step logs (target ≤ 5 s each on this machine).

Generates a trainer_state.json (HF Trainer, logging every step) and a Megatron-DeepSpeed iteration
log of a healthy run with one injected loss spike, then times the CLI in a fresh process (the
median of --repeats runs) and checks the spike was found.

    python bench/diagnose_speed.py [--steps 1000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def _loss(step: int, rng: random.Random, spike: int) -> float:
    base = 2.0 + 4.0 * math.exp(-step / 20_000) + rng.gauss(0, 0.01)
    return base * (2.5 if spike <= step < spike + 3 else 1.0)


def trainer_state(path: Path, steps: int, spike: int) -> None:
    rng = random.Random(0)
    rows = [{"epoch": round(s / steps, 6), "grad_norm": 0.3 + rng.random() * 0.05, "learning_rate": 3e-4,
             "loss": round(_loss(s, rng, spike), 4), "step": s} for s in range(1, steps + 1)]
    path.write_text(json.dumps({"global_step": steps, "max_steps": steps, "log_history": rows}))


def megatron(path: Path, steps: int, spike: int) -> None:
    rng = random.Random(1)
    with path.open("w") as f:
        for s in range(1, steps + 1):
            f.write(f" iteration {s:8d}/ {steps:8d} | consumed samples: {s * 512:12d} | elapsed time per iteration "
                    f"(ms): {1000 + rng.random() * 10:.1f} | learning rate: 3.000E-04 | global batch size:   512 | "
                    f"lm loss: {_loss(s, rng, spike):.6E} | loss scale: 65536.0 | grad norm: {0.3 + rng.random() * 0.05:.3f} | "
                    "number of skipped iterations:   0 | number of nan iterations:   0 |\n")


def time_cli(path: Path, repeats: int) -> tuple[float, dict]:
    env = dict(os.environ, PYTHONPATH=str(SRC))
    times, out = [], {}
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = subprocess.run([sys.executable, "-m", "stethoscope.cli.main", "diagnose", str(path), "--json"],
                             capture_output=True, text=True, env=env)
        times.append(time.perf_counter() - t0)
        if res.returncode != 0:
            raise SystemExit(f"diagnose failed: {res.stderr[-2000:]}")
        out = json.loads(res.stdout)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    spike = args.steps // 2
    with tempfile.TemporaryDirectory() as d:
        files = {"trainer_state.json": trainer_state, "megatron.log": megatron}
        print(f"stethoscope diagnose on {args.steps:,}-step logs (median of {args.repeats}, fresh process each)")
        for name, make in files.items():
            path = Path(d) / name
            make(path, args.steps, spike)
            seconds, out = time_cli(path, args.repeats)
            spikes = [f["step"] for f in out["findings"] if f["type"] == "loss_spike"]
            print(f"  {name:20s} {path.stat().st_size / 2**20:7.1f} MiB  {seconds:6.2f} s  (target <= 5 s)  "
                  f"steps={out['steps']:,}  loss_spike found at {spikes[:3]} (injected at {spike})")


if __name__ == "__main__":
    main()
