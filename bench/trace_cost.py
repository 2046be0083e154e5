"""What the module trace (`ProbeConfig(trace_every=N)`) costs on the step it samples, and how much of that
step its rows account for, on the demo's tiny GPT (CPU, one thread; interleaved rounds, medians).

Prints, side by side: a plain forward + backward; the same with every module hooked for the sampled step
(`ModuleTrace`, collected after it); the ratio; the parameter hooks the sampled step adds (only on the
direct parameters of modules whose inputs need no gradient); and the root module's forward + backward as a
fraction of the measured step (it should be close to 1: the trace adds up to the step).

    python bench/trace_cost.py [--rounds 7] [--reps 20]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from stethoscope.demo.gpt import GPTConfig, TinyGPT  # noqa: E402
from stethoscope.probe.trace import ModuleTrace  # noqa: E402


def _step(model: TinyGPT, x: torch.Tensor) -> float:
    t0 = time.perf_counter()
    _, loss = model(x, x)
    loss.backward()
    model.zero_grad(set_to_none=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = TinyGPT(GPTConfig())
    x = torch.randint(0, 128, (16, 32))
    trace = ModuleTrace(model, every=1)
    root = type(model).__name__
    plain, traced, cover, hooks = [], [], [], 0
    for _ in range(3):
        _step(model, x)
    for _ in range(args.rounds):
        for mode in random.sample(["plain", "traced"], 2):
            for _ in range(args.reps):
                if mode == "plain":
                    plain.append(_step(model, x))
                    continue
                trace.on_step(0)  # arm for the next step
                dt = _step(model, x)
                hooks = len(trace._handles) - 2 * sum(1 for _ in model.modules())  # beyond 2 per module
                rows = trace.on_step(1)
                traced.append(dt)
                whole = sum(d for _, m, _, d, _ in rows if m == root)
                cover.append(whole / dt)
    p, t = statistics.median(plain), statistics.median(traced)
    print(f"plain step {p * 1e3:.2f} ms, sampled step {t * 1e3:.2f} ms: x{t / p:.3f}")
    print(f"parameter hooks on the sampled step: {hooks} of {sum(1 for _ in model.parameters())} parameters")
    print(f"the root module's forward + backward rows: {statistics.median(cover):.3f} of the sampled step")


if __name__ == "__main__":
    main()
