"""What the debug tools cost, measured side by side on the demo's tiny GPT (interleaved rounds, medians).

1. `locate_nonfinite(model, batch)` against a plain forward + backward of the same batch (the locator
   hooks every module and parameter and undoes its side effects).
2. `gradients(model)` against the per-parameter `p.grad.norm().item()` loop it replaces, and the host
   reads each makes (each one a device sync on a GPU; counted with `stethoscope.testing.count_host_reads`).
3. The training step with `Monitor(debug_nonfinite=...)` and `mon.step(..., batch=...)` against the
   Monitor without it, when nothing goes wrong (what the opt-in costs a healthy run).

    python bench/debug_cost.py [--rounds 7] [--reps 10]
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from stethoscope import Monitor  # noqa: E402
from stethoscope.debug import NonfiniteWatch, gradients, locate_nonfinite  # noqa: E402
from stethoscope.demo.data import CharData, stdlib_text  # noqa: E402
from stethoscope.demo.gpt import GPTConfig, TinyGPT  # noqa: E402
from stethoscope.testing import count_host_reads  # noqa: E402

B, T = 16, 64


def _model() -> TinyGPT:
    torch.manual_seed(0)
    return TinyGPT(GPTConfig(block_size=T, n_layer=2, n_embd=128))


def _interleaved(variants: dict[str, Callable[[], None]], rounds: int, reps: int) -> dict[str, list[float]]:
    """Seconds per call of each variant, one median per round, variants shuffled within each round."""
    for fn in variants.values():
        fn()  # warm-up
    out: dict[str, list[float]] = {n: [] for n in variants}
    rng = random.Random(0)
    for _ in range(rounds):
        order = list(variants)
        rng.shuffle(order)
        for n in order:
            times = []
            for _ in range(reps):
                t0 = time.perf_counter()
                variants[n]()
                times.append(time.perf_counter() - t0)
            out[n].append(statistics.median(times))
    return out


def _ratio(out: dict[str, list[float]], name: str, base: str) -> str:
    ratios = sorted(a / b for a, b in zip(out[name], out[base]))
    return (f"{name:<34} {statistics.median(out[name]) * 1e3:8.2f} ms   x{statistics.median(ratios):.2f} "
            f"{base} (rounds {ratios[0]:.2f}-{ratios[-1]:.2f})")


def bench_locate(data: CharData, rounds: int, reps: int) -> None:
    model = _model()
    x, y, _ = data.batch(B)

    def plain() -> None:
        _, loss = model(x, y)
        loss.backward()
        model.zero_grad(set_to_none=True)

    out = _interleaved({"forward + backward": plain, "locate_nonfinite": lambda: locate_nonfinite(model, (x, y))},
                       rounds, reps)
    print(_ratio(out, "locate_nonfinite", "forward + backward"))


def bench_gradients(data: CharData, rounds: int, reps: int) -> None:
    model = _model()
    x, y, _ = data.batch(B)
    model(x, y)[1].backward()

    def per_param() -> None:
        norms = {n: p.grad.norm().item() for n, p in model.named_parameters()}  # the tutorial way
        sum(v * v for v in norms.values())

    out = _interleaved({"per-parameter .item() loop": per_param, "gradients()": lambda: gradients(model)},
                       rounds, reps)
    print(_ratio(out, "gradients()", "per-parameter .item() loop"))
    with count_host_reads() as fused:
        gradients(model)
    with count_host_reads() as loop:
        per_param()
    print(f"{'host reads':<34} gradients() {fused.count}, per-parameter loop {loop.count} "
          f"({sum(1 for _ in model.parameters())} parameters)")


def bench_monitor(data: CharData, rounds: int, reps: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as closing:
        steps = {}
        for name, debug in (("monitor", False), ("monitor + debug_nonfinite", True)):
            model = _model()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
            mon = Monitor(Path(tmp) / name.replace(" ", "_"), model=model, optimizer=opt, tokens_per_step=B * T,
                          debug_nonfinite=NonfiniteWatch() if debug else False)
            closing.callback(mon.close)
            steps[name] = _trainer(model, opt, mon, data, debug)
        out = _interleaved(steps, rounds, reps)
    print(_ratio(out, "monitor + debug_nonfinite", "monitor"))


def _trainer(model: TinyGPT, opt: torch.optim.Optimizer, mon: Monitor, data: CharData,
             debug: bool) -> Callable[[], None]:
    state = {"step": 0}

    def step() -> None:
        x, y, ids = data.batch(B)
        _, loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        mon.step(state["step"], loss=loss, batch_ids=ids, batch=(x, y) if debug else None)
        state["step"] += 1
    return step


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    torch.set_num_threads(1)
    data = CharData(stdlib_text(), T)
    print(f"tiny GPT (2 layers, n_embd 128), batch {B}x{T}, CPU, {args.rounds} interleaved rounds x {args.reps}")
    bench_locate(data, args.rounds, args.reps)
    bench_gradients(data, args.rounds, args.reps)
    bench_monitor(data, args.rounds, args.reps)


if __name__ == "__main__":
    main()
