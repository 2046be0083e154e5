"""Step-time overhead of monitoring a tiny GPT, measured side by side (interleaved rounds, medians).

Variants: no monitoring; the Monitor with defaults; with detectors off; with per-layer norms; the
per-parameter `p.grad.norm().item()` callback tutorials show; TensorBoard's SummaryWriter logging
the same scalars. Prints each variant's step-time ratio against no monitoring (the median of the
per-round ratios, with their min–max and interquartile range across rounds), and how many tensor
values each variant reads back to the host per step: on a GPU each read is a device sync, which a
CPU run cannot show in time but can count.

    python bench/overhead.py [--rounds 7] [--steps 30]
"""

from __future__ import annotations

import argparse
import contextlib
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

B, T = 16, 64


class Variant:
    def __init__(self, name: str, tmp: Path, data: CharData, device: str) -> None:
        torch.manual_seed(0)
        self.name = name
        self.data = data
        self.device = device
        self.model = TinyGPT(GPTConfig(block_size=T, n_layer=2, n_embd=128)).to(device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.step_no = 0
        self.mon = self.tb = None
        self.last = time.perf_counter()
        if name.startswith("monitor"):
            opts = {"detect": name != "monitor, no detectors", "grad_norms": "layers" if "layer" in name else "global"}
            self.mon = Monitor(tmp / name.replace(" ", "_").replace(",", ""), model=self.model, optimizer=self.opt,
                               tokens_per_step=B * T, **opts)
        elif name == "tensorboard":
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(str(tmp / "tb"))

    def step(self) -> None:
        x, y, ids = self.data.batch(B)
        x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
        _, loss = self.model(x, y)
        loss.backward()
        self.opt.step()
        s = self.step_no
        if self.mon is not None:
            self.mon.step(s, loss=loss, batch_ids=ids)
        elif self.name == "per-parameter callback":
            norms = {n: p.grad.norm().item() for n, p in self.model.named_parameters()}  # the tutorial way
            total = sum(v * v for v in norms.values()) ** 0.5
            self.logged = (loss.item(), total)
        elif self.tb is not None:
            now = time.perf_counter()
            norm = torch.nn.utils.get_total_norm([p.grad for p in self.model.parameters()])
            self.tb.add_scalar("train/loss", loss.item(), s)
            self.tb.add_scalar("grad/norm", norm.item(), s)
            self.tb.add_scalar("opt/lr", self.opt.param_groups[0]["lr"], s)
            self.tb.add_scalar("perf/step_time_s", now - self.last, s)
            self.tb.add_scalar("perf/tokens_per_s", B * T / max(now - self.last, 1e-9), s)
            self.last = now
        self.opt.zero_grad(set_to_none=True)
        self.step_no += 1

    def close(self) -> None:
        if self.mon is not None:
            self.mon.close()
        if self.tb is not None:
            self.tb.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--device", default="cpu", help="cpu, or cuda: on a GPU the per-parameter callback pays "
                    "one host sync per tensor, which a CPU cannot show")
    args = ap.parse_args()
    cuda = args.device.startswith("cuda")
    torch.set_num_threads(1)
    names = ["none", "monitor (defaults)", "monitor, no detectors", "monitor + layer norms",
             "per-parameter callback", "tensorboard"]
    data = CharData(stdlib_text(), T)
    # ExitStack unwinds in reverse: every Monitor is closed (run.json written) before its directory goes,
    # even when a variant fails half-way
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as closing:
        variants: dict[str, Variant] = {}
        for n in names:
            variants[n] = Variant(n, Path(tmp), data, args.device)
            closing.callback(variants[n].close)
        for v in variants.values():  # warm-up
            for _ in range(5):
                v.step()
        medians: dict[str, list[float]] = {n: [] for n in names}
        rng = random.Random(0)
        for _ in range(args.rounds):
            order = names[:]
            rng.shuffle(order)
            for n in order:
                times = []
                for _ in range(args.steps):
                    t0 = time.perf_counter()
                    variants[n].step()
                    if cuda:
                        torch.cuda.synchronize()  # host sync: the bench times whole steps
                    times.append(time.perf_counter() - t0)
                medians[n].append(statistics.median(times))
        reads = {n: host_reads_per_step(variants[n]) for n in names}
    report(names, medians, reads, args.device)


def host_reads_per_step(variant: Variant, steps: int = 40) -> float:
    """Reads of tensor values by the host per step (item, tolist, ...): on a GPU each one is a sync."""
    from stethoscope.testing import count_host_reads

    with count_host_reads() as reads:
        for _ in range(steps):
            variant.step()
    return reads.count / steps


def spread(values: list[float]) -> tuple[float, float, float]:
    """(min, max, interquartile range) of per-round values; the IQR is 0 for fewer than 2 rounds."""
    iqr = 0.0
    if len(values) >= 2:
        q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
        iqr = q3 - q1
    return min(values), max(values), iqr


def report(names: list[str], medians: dict[str, list[float]], reads: dict[str, float], device: str) -> None:
    base = medians["none"]
    per_round = {n: [m / b for m, b in zip(medians[n], base)] for n in names}
    ratio = {n: statistics.median(r) for n, r in per_round.items()}
    print(f"bench model: tiny GPT (2 layers, d=128) on {device}, batch {B}x{T}; median step "
          f"{statistics.median(base) * 1e3:.1f} ms without monitoring; {len(base)} interleaved rounds")
    print(f"{'variant':28s} {'median step ms':>15s} {'ratio vs none':>14s} {'per-round min–max':>18s} "
          f"{'IQR':>7s} {'added host reads/step':>22s}")
    for n in names:
        lo, hi, iqr = spread(per_round[n])
        print(f"{n:28s} {statistics.median(medians[n]) * 1e3:15.2f} {ratio[n]:14.4f} {f'{lo:.3f}–{hi:.3f}':>18s} "
              f"{iqr:7.4f} {reads[n] - reads['none']:22.2f}")
    ours = ratio["monitor (defaults)"] - 1
    theirs = ratio["per-parameter callback"] - 1
    lo, hi, iqr = spread(per_round["monitor (defaults)"])
    print(f"\nMonitor defaults: {ratio['monitor (defaults)']:.4f}x (rounds {lo:.4f}–{hi:.4f}, IQR {iqr:.4f}; "
          f"target <= 1.02x)")
    print(f"detectors' share: {ratio['monitor (defaults)'] / ratio['monitor, no detectors'] - 1:+.2%} "
          f"(target <= +0.5%)")
    print(f"vs TensorBoard variant: {ratio['monitor (defaults)'] / ratio['tensorboard']:.4f} (target <= 1)")
    print(f"host reads per step (each one a device sync on a GPU): ours "
          f"{reads['monitor (defaults)'] - reads['none']:.2f}, per-parameter callback "
          f"{reads['per-parameter callback'] - reads['none']:.2f}")
    if ours > 0:
        print(f"per-parameter callback's extra cost / ours: {theirs / ours:.1f}x (target >= 5x)")
    else:
        print(f"per-parameter callback's extra cost: {theirs:+.2%}; ours is within noise ({ours:+.2%})")


if __name__ == "__main__":
    main()
