"""Step-time overhead of monitoring a tiny GPT, measured side by side (interleaved rounds, medians).

Variants: no monitoring; the Monitor with defaults; with detectors off; with per-layer norms; the
per-parameter `p.grad.norm().item()` callback tutorials show; TensorBoard's SummaryWriter logging
the same scalars. Prints each variant's step-time ratio against no monitoring (the median of the
per-round ratios, with their min–max and interquartile range across rounds), and how many tensor
values each variant reads back to the host per step: on a GPU each read is a device sync, which a
CPU run cannot show in time but can count.

`--model gpt2-small` is the nanoGPT-shaped GPT-2 small of issue 28 (12 layers, d=768, batch 8x1024,
bf16 autocast on a GPU, fused AdamW there, `clip_grad_norm_(1.0)` in every arm), with the arms people
compare: no monitoring; what people write (`loss.item()`, `grad_norm.item()` and the LR to TensorBoard
every step); the per-parameter callback; the Monitor with defaults and `grad_norm=` passed; with per-layer
norms. It also prints the kernels (GPU) or top-level aten ops (CPU) each arm adds per step, from
torch.profiler. It needs a GPU to be quick (a CPU step takes seconds: use --batch/--seq to shrink it).

    python bench/overhead.py [--rounds 7] [--steps 30]
    python bench/overhead.py --model gpt2-small --device cuda --rounds 11 --steps 30
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
TINY_ARMS = ["none", "monitor (defaults)", "monitor, no detectors", "monitor + layer norms", "per-parameter callback",
             "tensorboard"]
GPT2_ARMS = ["none", "what people write", "per-parameter callback", "monitor (defaults)", "monitor + layer norms"]


class Variant:
    def __init__(self, name: str, tmp: Path, data: CharData, device: str, gpt2: bool = False) -> None:
        torch.manual_seed(0)
        self.name = name
        self.data = data
        self.device = device
        self.gpt2 = gpt2
        cfg = (GPTConfig(block_size=T, n_layer=12, n_head=12, n_embd=768, vocab_size=50304) if gpt2
               else GPTConfig(block_size=T, n_layer=2, n_embd=128))
        self.model = TinyGPT(cfg).to(device)
        fused = gpt2 and device.startswith("cuda")
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, **({"fused": True} if fused else {}))
        self.autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if fused else contextlib.nullcontext())
        self.step_no = 0
        self.mon = self.tb = None
        self.last = time.perf_counter()
        if name.startswith("monitor"):
            opts = {"detect": name != "monitor, no detectors", "grad_norms": "layers" if "layer" in name else "global"}
            self.mon = Monitor(tmp / name.replace(" ", "_").replace(",", ""), model=self.model, optimizer=self.opt,
                               tokens_per_step=B * T, **opts)
        elif name in ("tensorboard", "what people write"):
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(str(tmp / name.replace(" ", "_")))

    def step(self) -> None:
        x, y, ids = self.data.batch(B)
        x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
        with self.autocast:
            _, loss = self.model(x, y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0) if self.gpt2 else None
        self.opt.step()
        s = self.step_no
        if self.mon is not None:
            self.mon.step(s, loss=loss, batch_ids=ids, grad_norm=norm)
        elif self.name == "what people write":  # every step: two host syncs and three scalars to TensorBoard
            self.tb.add_scalar("train/loss", loss.item(), s)  # host sync: the arm measures what people write
            self.tb.add_scalar("grad/norm", norm.item(), s)  # host sync: idem
            self.tb.add_scalar("opt/lr", self.opt.param_groups[0]["lr"], s)
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
    ap.add_argument("--model", choices=("tiny", "gpt2-small"), default="tiny",
                    help="tiny: the demo GPT (2 layers, d=128, batch 16x64); gpt2-small: 12 layers, d=768, batch 8x1024")
    ap.add_argument("--batch", type=int, default=None, help="sequences per step (default 16 tiny, 8 gpt2-small)")
    ap.add_argument("--seq", type=int, default=None, help="tokens per sequence (default 64 tiny, 1024 gpt2-small)")
    args = ap.parse_args()
    global B, T
    gpt2 = args.model == "gpt2-small"
    B = args.batch or (8 if gpt2 else 16)
    T = args.seq or (1024 if gpt2 else 64)
    cuda = args.device.startswith("cuda")
    torch.set_num_threads(1)
    names = GPT2_ARMS if gpt2 else TINY_ARMS
    data = CharData(stdlib_text(), T)
    # ExitStack unwinds in reverse: every Monitor is closed (run.json written) before its directory goes,
    # even when a variant fails half-way
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as closing:
        variants: dict[str, Variant] = {}
        for n in names:
            variants[n] = Variant(n, Path(tmp), data, args.device, gpt2)
            closing.callback(variants[n].close)
        for v in variants.values():  # warm-up
            for _ in range(3 if gpt2 else 5):
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
        reads = {n: host_reads_per_step(variants[n], 10 if gpt2 else 40) for n in names}
        ops = {n: ops_per_step(variants[n], cuda) for n in names}
    report(names, medians, reads, args.device, ops, args.model)


def host_reads_per_step(variant: Variant, steps: int = 40) -> float:
    """Reads of tensor values by the host per step (item, tolist, ...): on a GPU each one is a sync."""
    from stethoscope.testing import count_host_reads

    with count_host_reads() as reads:
        for _ in range(steps):
            variant.step()
    return reads.count / steps


def ops_per_step(variant: Variant, cuda: bool, steps: int = 10) -> float:
    """CUDA kernels (on a GPU) or top-level aten ops (on the CPU) per step, from torch.profiler: over
    `steps` steps, a whole `details_every` cycle of the Monitor."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=acts) as prof:
        for _ in range(steps):
            variant.step()
        if cuda:
            torch.cuda.synchronize()  # host sync: the profile holds every kernel of the steps
    if not cuda:
        from stethoscope.testing import top_level_ops

        return top_level_ops(prof) / steps
    return sum(e.device_type == torch.autograd.DeviceType.CUDA for e in prof.events()) / steps


def spread(values: list[float]) -> tuple[float, float, float]:
    """(min, max, interquartile range) of per-round values; the IQR is 0 for fewer than 2 rounds."""
    iqr = 0.0
    if len(values) >= 2:
        q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
        iqr = q3 - q1
    return min(values), max(values), iqr


def report(names: list[str], medians: dict[str, list[float]], reads: dict[str, float], device: str,
           ops: dict[str, float], model: str = "tiny") -> None:
    base = medians["none"]
    per_round = {n: [m / b for m, b in zip(medians[n], base)] for n in names}
    ratio = {n: statistics.median(r) for n, r in per_round.items()}
    shape = "GPT-2 small (12 layers, d=768)" if model == "gpt2-small" else "tiny GPT (2 layers, d=128)"
    unit = "kernels" if device.startswith("cuda") else "aten ops"
    print(f"bench model: {shape} on {device}, batch {B}x{T}; median step "
          f"{statistics.median(base) * 1e3:.1f} ms without monitoring; {len(base)} interleaved rounds")
    print(f"{'variant':28s} {'median step ms':>15s} {'ratio vs none':>14s} {'per-round min–max':>18s} "
          f"{'IQR':>7s} {'added host reads/step':>22s} {f'added {unit}/step':>20s}")
    for n in names:
        lo, hi, iqr = spread(per_round[n])
        print(f"{n:28s} {statistics.median(medians[n]) * 1e3:15.2f} {ratio[n]:14.4f} {f'{lo:.3f}–{hi:.3f}':>18s} "
              f"{iqr:7.4f} {reads[n] - reads['none']:22.2f} {ops[n] - ops['none']:20.1f}")
    if model == "gpt2-small":
        lo, hi, iqr = spread(per_round["monitor (defaults)"])
        print(f"\nMonitor defaults (grad_norm= passed): {ratio['monitor (defaults)']:.4f}x (rounds {lo:.4f}–{hi:.4f}; "
              f"target <= 1.01x on a GPU); what people write: {ratio['what people write']:.4f}x")
        return
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
