"""What it costs to say in an alert what `diagnose` says: `run_incidents` over the store at alert time.

    python bench/alert_truth.py [--steps 100000] [--rounds 5] [--out DIR]

Records a run of `--steps` steps (loss, grad norm, LR; a NaN 1,000 steps before the end) with a Monitor,
then times, side by side in interleaved rounds: `act.truth.Truth.settle` of one trigger (what the
dispatcher's settle thread does before an alert goes out: open the store, `run_incidents`, match, render)
and a bare `run_incidents` of the same store (what `diagnose` of the run costs). Prints the median seconds
per alert and the ratio of the two. This runs on the alerts' own thread, never the trainer's, but it holds
the GIL for most of that time: the last figure is the training step's time (a small torch MLP, one thread)
while one settle runs beside it, over its time alone, interleaved. Machine: 2 shared cores; trust the
ratios, not the absolutes.
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from stethoscope import Monitor  # noqa: E402
from stethoscope.act.alert import Alert  # noqa: E402
from stethoscope.act.truth import RUN_INCIDENTS, Truth  # noqa: E402
from stethoscope.diagnose.stored import run_incidents  # noqa: E402
from stethoscope.store.query import open_run  # noqa: E402


def record(run: Path, steps: int) -> int:
    """A smooth decaying loss with a NaN at `steps - 1000`; the NaN's step."""
    nan_at = steps - 1000
    with Monitor(run, serve=False) as mon:
        for s in range(steps):
            loss = 2.0 + 3.0 * math.exp(-s / (steps / 8)) + 0.02 * math.sin(s * 1.7)
            mon.step(s, loss=float("nan") if s == nan_at else loss, grad_norm=0.5 + 0.01 * (s % 7), lr=1e-3)
    return nan_at


def step_time(steps: int = 200) -> float:
    """Median seconds of one step of a small MLP (torch, one thread)."""
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 256), torch.randn(64, 1)
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def beside_settle(run: Path, nan_at: int) -> float:
    """The step time while one settle runs on another thread (as the dispatcher's would)."""
    truth = Truth(str(run), 0, ["warning"])
    alert = Alert("trigger", f"bench/r0/nan@{nan_at}", "nan", "critical", nan_at, 0, "non-finite loss")
    worker = threading.Thread(target=truth.settle, args=([(0, alert)], 60.0))
    worker.start()
    t = step_time(100)
    worker.join()
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    root = args.out or Path(tempfile.mkdtemp(prefix="alert-truth-"))
    run = root / "run"
    shutil.rmtree(run, ignore_errors=True)
    t0 = time.perf_counter()
    nan_at = record(run, args.steps)
    print(f"recorded {args.steps:,} steps in {time.perf_counter() - t0:.1f} s ({run})")
    truth = Truth(str(run), 0, ["warning"])
    settle, bare = [], []
    for _ in range(args.rounds):
        alert = Alert("trigger", f"bench/r0/nan@{nan_at}", "nan", "critical", nan_at, 0, "non-finite loss")
        t = time.perf_counter()
        (sent,), _ = truth.settle([(0, alert)], 60.0)
        settle.append(time.perf_counter() - t)
        assert sent[1].basis == RUN_INCIDENTS, sent[1].basis
        t = time.perf_counter()
        with open_run(run) as reader:
            run_incidents(reader)
        bare.append(time.perf_counter() - t)
    s, b = statistics.median(settle), statistics.median(bare)
    print(f"per alert (settle: open the store, run_incidents, match, render): {s:.3f} s median of {args.rounds}")
    print(f"run_incidents alone (what `diagnose` of this run costs):         {b:.3f} s")
    print(f"ratio settle / run_incidents: x{s / b:.2f}")
    alone, beside = [], []
    for _ in range(args.rounds):
        alone.append(step_time(100))
        beside.append(beside_settle(run, nan_at))
    print(f"training step while an alert settles / alone: x{statistics.median(beside) / statistics.median(alone):.2f} "
          f"({statistics.median(alone) * 1e3:.2f} ms alone), for the ~{s:.1f} s of one settle")
    if args.out is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
