"""What feeding other tools costs: live export's step-time ratio, and each exporter's throughput.

1. Step time of a tiny GPT with the Monitor alone vs the Monitor exporting live to Prometheus,
   TensorBoard, MLflow (file store) and all of them (interleaved rounds, medians, ratios against the
   Monitor alone): the exporters run on the writer and export threads, so the ratio should stay ~1.
2. Points per second each exporter takes when a stored run is replayed into it (`stethoscope export`).

    python bench/export.py [--rounds 5] [--steps 30] [--points 200000]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from stethoscope import Monitor  # noqa: E402
from stethoscope.demo.data import CharData, stdlib_text  # noqa: E402
from stethoscope.demo.gpt import GPTConfig, TinyGPT  # noqa: E402
from stethoscope.exporters.base import ExportContext  # noqa: E402

B, T = 16, 64
os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # a bench script, not the library: MLflow's own switches
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")


def exporters(name: str, tmp: Path) -> dict:
    from stethoscope.exporters.mlflow import MLflow

    mlflow = MLflow(tracking_uri=(tmp / f"mlruns-{name}").as_uri())
    return {"monitor": {}, "+ prometheus": {"prometheus_port": 0}, "+ tensorboard": {"export": ["tensorboard"]},
            "+ mlflow": {"export": [mlflow]},
            "+ all three": {"prometheus_port": 0, "export": ["tensorboard", mlflow]}}[name]


class Variant:
    def __init__(self, name: str, tmp: Path, data: CharData) -> None:
        torch.manual_seed(0)
        self.data = data
        self.model = TinyGPT(GPTConfig(block_size=T, n_layer=2, n_embd=128))
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.step_no = 0
        slug = name.replace(" ", "").replace("+", "plus-")
        self.mon = Monitor(tmp / slug, model=self.model, optimizer=self.opt, tokens_per_step=B * T,
                           **exporters(name, tmp))

    def step(self) -> None:
        x, y, ids = self.data.batch(B)
        _, loss = self.model(x, y)
        loss.backward()
        self.opt.step()
        self.mon.step(self.step_no, loss=loss, batch_ids=ids)
        self.opt.zero_grad(set_to_none=True)
        self.step_no += 1


def step_ratios(rounds: int, steps: int) -> None:
    names = ["monitor", "+ prometheus", "+ tensorboard", "+ mlflow", "+ all three"]
    data = CharData(stdlib_text(), T)
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as closing:
        variants = {}
        for n in names:
            variants[n] = Variant(n, Path(tmp), data)
            closing.callback(variants[n].mon.close)
        for v in variants.values():
            for _ in range(5):
                v.step()
        medians: dict[str, list[float]] = {n: [] for n in names}
        rng = random.Random(0)
        for _ in range(rounds):
            order = names[:]
            rng.shuffle(order)
            for n in order:
                times = []
                for _ in range(steps):
                    t0 = time.perf_counter()
                    variants[n].step()
                    times.append(time.perf_counter() - t0)
                medians[n].append(statistics.median(times))
        errors = {n: (v.mon.exports.errors, v.mon.exports.dropped) if v.mon.exports else (0, 0)
                  for n, v in variants.items()}
    base = medians["monitor"]
    print(f"live export, tiny GPT (2 layers, d=128) on cpu, batch {B}x{T}; {rounds} interleaved rounds of {steps} "
          f"steps; median step {statistics.median(base) * 1e3:.1f} ms with the Monitor alone")
    print(f"{'variant':16s} {'median step ms':>15s} {'ratio vs monitor':>17s} {'min–max':>13s} {'errors/drops':>13s}")
    for n in names:
        r = [m / b for m, b in zip(medians[n], base)]
        print(f"{n:16s} {statistics.median(medians[n]) * 1e3:15.2f} {statistics.median(r):17.4f} "
              f"{f'{min(r):.3f}–{max(r):.3f}':>13s} {'%d/%d' % errors[n]:>13s}")


def throughput(points: int) -> None:
    from stethoscope.exporters.mlflow import MLflow
    from stethoscope.exporters.prometheus import Prometheus
    from stethoscope.exporters.tensorboard import TensorBoard
    from stethoscope.exporters.wandb import WandB

    names = ["train/loss", "grad/norm", "opt/lr", "perf/step_time_s", "perf/tokens_per_s"]
    rows = [(names[i % 5], i // 5, 1.0 + (i % 7) * 0.1, 1.7e9 + i * 1e-3) for i in range(points)]
    print(f"\nreplay throughput ({points:,} points, 5 series; what `stethoscope export` sustains):")
    with tempfile.TemporaryDirectory() as tmp:
        ctx = ExportContext(run="bench", run_dir=Path(tmp))
        for label, make in (("prometheus", Prometheus), ("tensorboard", TensorBoard),
                            ("mlflow (file store)", lambda: MLflow(tracking_uri=(Path(tmp) / "mlruns").as_uri())),
                            ("wandb (offline)", lambda: WandB(dir=tmp))):
            exporter = make()
            exporter.open(ctx)
            t0 = time.perf_counter()
            for start in range(0, len(rows), 10_000):
                exporter.write(rows[start:start + 10_000], [])
            exporter.close()
            dt = time.perf_counter() - t0
            print(f"  {label:22s} {points / dt:12,.0f} points/s  ({dt:.2f} s, close included)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--points", type=int, default=200_000)
    args = ap.parse_args()
    torch.set_num_threads(1)
    step_ratios(args.rounds, args.steps)
    throughput(args.points)


if __name__ == "__main__":
    main()
