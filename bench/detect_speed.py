"""Cost of the live detectors: DetectorSet.update on one record of ~15 values, in microseconds.

    python bench/detect_speed.py [--steps 20000] [--rounds 5]

Feeds a healthy synthetic run (warm-up, noisy decreasing loss, grad norm, LR schedule, loss scale,
step time, memory, eval every 500 steps) and reports the median per-record cost over rounds. The
budget (DESIGN §5): <= 0.5% of a ~20 ms training step, i.e. <= ~30 us per record.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from stethoscope import records as R  # noqa: E402
from stethoscope.detect.registry import DetectorSet  # noqa: E402
from stethoscope.records import StepRecord  # noqa: E402


def synthetic_records(steps: int, seed: int = 0) -> list[StepRecord]:
    rng = random.Random(seed)
    out = []
    for s in range(steps):
        lr = 3e-4 * min(1.0, (s + 1) / 500) * (0.5 * (1 + math.cos(math.pi * s / steps)))
        loss = 2.0 + 8.0 * math.exp(-s / 800) + rng.gauss(0, 0.03)
        values = {
            R.LOSS: loss, R.LR: lr, R.GRAD_NORM: abs(1.0 + rng.gauss(0, 0.1)), R.GRAD_CLIP_COEF: 1.0,
            R.PARAM_NORM: 100.0 + s * 1e-3, R.UPDATE_RATIO: 1e-3 * (1 + rng.gauss(0, 0.05)),
            R.LOSS_SCALE: 65536.0, R.STEP_TIME: 0.02 * (1 + abs(rng.gauss(0, 0.02))),
            R.TOKENS_PER_S: 4e5, R.DATA_WAIT: 1e-3, R.CUDA_ALLOCATED: 10.0, R.CUDA_RESERVED: 12.0,
            R.CUDA_PEAK: 14.0, R.CUDA_TOTAL: 80.0, R.RSS: 5.0,
        }
        if s % 500 == 499:
            values[R.EVAL_LOSS] = loss + 0.05
        out.append(StepRecord(s, values))
    return out


def measure(records: list[StepRecord]) -> float:
    """Seconds per record for one full replay through a fresh DetectorSet."""
    ds = DetectorSet(strict=True)
    t0 = time.perf_counter()
    for r in records:
        ds.update(r)
    return (time.perf_counter() - t0) / len(records)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    records = synthetic_records(args.steps)
    per = [measure(records) for _ in range(args.rounds)]
    us = statistics.median(per) * 1e6
    print(f"DetectorSet.update: {us:.1f} us/record (median of {args.rounds} rounds, {args.steps} records, "
          f"{len(records[0].values)} values each); {us / 20000 * 100:.3f}% of a 20 ms step")


if __name__ == "__main__":
    main()
