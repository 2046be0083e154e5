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

Beside the ratios, the host cost of each arm, a count-like figure that a 5 ms GPU step's noise cannot hide:
the training thread's CPU time (`time.thread_time`) and wall time per step inside the arm's monitoring call
and the optimizer and forward hooks it installed (timed by the bench's own hooks registered around them),
mean and median over every step of the rounds (so the heavy `details_every` / `log_every` steps count), and
the CPU time per step of the threads the arm started (the Monitor's writer, the others). Wall above CPU on
the training thread is time it waited: for the GIL (the writer holding it) or for a core.
`--clip` runs `clip_grad_norm_(1.0)` in every arm and passes its norm as `grad_norm=` (gpt2-small always does).
`--before SRC` measures the host cost of the Monitor from another source tree beside this one (e.g.
`git archive <commit> src | tar -x -C /tmp/before`): fresh processes, trees alternated, medians of `--repeat`.

    python bench/overhead.py [--rounds 7] [--steps 30] [--clip]
    python bench/overhead.py --model gpt2-small --device cuda --rounds 11 --steps 30
    python bench/overhead.py --before /tmp/before/src --repeat 5 --rounds 5 --steps 30 [--clip]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import torch

SRC = Path(__file__).resolve().parents[1] / "src"
B, T = 16, 64
TINY_ARMS = ["none", "monitor (defaults)", "monitor, no detectors", "monitor + layer norms", "per-parameter callback",
             "tensorboard"]
GPT2_ARMS = ["none", "what people write", "per-parameter callback", "monitor (defaults)", "monitor + layer norms"]


def load(src: Path) -> None:
    """Import stethoscope (and the demo model) from the source tree `src`."""
    global Monitor, CharData, stdlib_text, GPTConfig, TinyGPT
    sys.path.insert(0, str(src))
    from stethoscope import Monitor
    from stethoscope.demo.data import CharData, stdlib_text
    from stethoscope.demo.gpt import GPTConfig, TinyGPT


class HostCost:
    """One arm's host time per step on the training thread (its monitoring call, and the optimizer and forward
    hooks it installed), and the CPU time of the threads it started."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float, float]] = []  # per step: call CPU, hooks CPU, wall of both
        self.on = False
        self.threads: list[threading.Thread] = []
        self._call = self._hooks = self._wall = self._c0 = self._w0 = 0.0
        self._threads_cpu0: dict[str, float] = {}
        self._steps0 = 0

    def open(self, *_: Any) -> None:
        self._c0, self._w0 = time.thread_time(), time.perf_counter()

    def close(self, *_: Any) -> None:
        self._wall += time.perf_counter() - self._w0
        self._call += time.thread_time() - self._c0

    def close_hook(self, *_: Any) -> None:
        self._wall += time.perf_counter() - self._w0
        self._hooks += time.thread_time() - self._c0

    def end_step(self) -> None:
        if self.on:
            self.samples.append((self._call, self._hooks, self._wall))
        self._call = self._hooks = self._wall = 0.0

    def around_hooks(self, model: Any, opt: Any, install: Any) -> Any:
        """`install()` (the arm's hooks, threads) between the bench's own hooks: timed with its calls."""
        before = set(threading.enumerate())
        opt.register_step_pre_hook(self.open)  # optimizer hooks run in the order they were registered
        opt.register_step_post_hook(self.open)
        made = install()
        opt.register_step_pre_hook(self.close_hook)
        opt.register_step_post_hook(self.close_hook)
        model.register_forward_pre_hook(self.open, prepend=True)
        model.register_forward_pre_hook(self.close_hook)
        model.register_forward_hook(self.open, prepend=True)
        model.register_forward_hook(self.close_hook)
        self.threads = [t for t in threading.enumerate() if t not in before]
        return made

    def threads_cpu(self) -> dict[str, float]:
        """CPU seconds of the arm's threads so far: the Monitor's writer, and all the others it started."""
        out = {"writer": 0.0, "other": 0.0}
        for t in self.threads:
            with contextlib.suppress(OSError, ProcessLookupError, TypeError):
                cpu = time.clock_gettime(time.pthread_getcpuclockid(t.ident))
                out["writer" if t.name == "stethoscope-writer" else "other"] += cpu
        return out

    def start(self) -> None:
        self.on = True
        self._threads_cpu0 = self.threads_cpu()
        self._steps0 = len(self.samples)

    def summary(self) -> dict[str, float]:
        """µs per step: the training thread's CPU (call, hooks, both) and wall, the threads' CPU."""
        steps = max(1, len(self.samples) - self._steps0)
        end = self.threads_cpu()
        us = 1e6
        call, hooks, wall = ([x[i] * us for x in self.samples] for i in range(3))
        cpu = [c + h for c, h in zip(call, hooks)]
        return {"call_mean": statistics.mean(call), "call_median": statistics.median(call),
                "hooks_mean": statistics.mean(hooks), "cpu_mean": statistics.mean(cpu),
                "cpu_median": statistics.median(cpu), "wall_mean": statistics.mean(wall),
                "wall_median": statistics.median(wall), "wall_p95": statistics.quantiles(wall, n=20)[-1],
                "writer": (end["writer"] - self._threads_cpu0["writer"]) / steps * us,
                "other": (end["other"] - self._threads_cpu0["other"]) / steps * us}


class Variant:
    def __init__(self, name: str, tmp: Path, data: CharData, device: str, gpt2: bool = False,
                 clip: bool = False) -> None:
        torch.manual_seed(0)
        self.name = name
        self.data = data
        self.device = device
        self.gpt2 = gpt2
        self.clip = gpt2 or clip
        self.cost = HostCost()
        cfg = (GPTConfig(block_size=T, n_layer=12, n_head=12, n_embd=768, vocab_size=50304) if gpt2
               else GPTConfig(block_size=T, n_layer=2, n_embd=128))
        self.model = TinyGPT(cfg).to(device)
        fused = gpt2 and device.startswith("cuda")
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, **({"fused": True} if fused else {}))
        self.autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if fused else contextlib.nullcontext())
        self.step_no = 0
        self.mon = self.tb = None
        self.last = time.perf_counter()
        self.cost.around_hooks(self.model, self.opt, lambda: self._start(tmp))

    def _start(self, tmp: Path) -> None:
        name = self.name
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
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0) if self.clip else None
        self.opt.step()
        self.cost.open()
        self._monitor(norm, loss, ids)
        self.cost.close()
        self.cost.end_step()
        self.opt.zero_grad(set_to_none=True)
        self.step_no += 1

    def _monitor(self, norm: Any, loss: Any, ids: Any) -> None:
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
    ap.add_argument("--clip", action="store_true", help="clip_grad_norm_(1.0) in every arm, its norm passed as grad_norm=")
    ap.add_argument("--before", type=Path, help="the src/ of a tree to compare the Monitor's host cost with")
    ap.add_argument("--repeat", type=int, default=5, help="with --before: fresh processes per tree, alternated")
    ap.add_argument("--src", type=Path, default=SRC, help=argparse.SUPPRESS)  # a --before worker's tree
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # a --before worker: host cost as JSON
    args = ap.parse_args()
    if args.before is not None:
        compare_trees(args)
        return
    load(args.src)
    global B, T
    gpt2 = args.model == "gpt2-small"
    B = args.batch or (8 if gpt2 else 16)
    T = args.seq or (1024 if gpt2 else 64)
    torch.set_num_threads(1)
    names = (GPT2_ARMS if gpt2 else TINY_ARMS) if not args.json else ["none", "monitor (defaults)"]
    medians, costs, reads, ops = measure(args, names, gpt2, counts=not args.json)
    if args.json:
        base = medians["none"]
        for n in names:
            costs[n]["ratio"] = statistics.median(m / b for m, b in zip(medians[n], base))
        print(json.dumps(costs))
        return
    report(names, medians, reads, args.device, ops, args.model)
    report_cost(names, costs, args.steps * args.rounds)


def measure(args: argparse.Namespace, names: list[str], gpt2: bool, counts: bool = True) -> tuple[Any, ...]:
    """Interleaved rounds of every arm: per-round median step times, host cost; host reads and ops per step."""
    cuda = args.device.startswith("cuda")
    data = CharData(stdlib_text(), T)
    # ExitStack unwinds in reverse: every Monitor is closed (run.json written) before its directory goes,
    # even when a variant fails half-way
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as closing:
        variants: dict[str, Variant] = {}
        for n in names:
            variants[n] = Variant(n, Path(tmp), data, args.device, gpt2, args.clip)
            closing.callback(variants[n].close)
        for v in variants.values():  # warm-up
            for _ in range(3 if gpt2 else 5):
                v.step()
            v.cost.start()
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
        costs = {n: variants[n].cost.summary() for n in names}
        for v in variants.values():
            v.cost.on = False
        reads = {n: host_reads_per_step(variants[n], 10 if gpt2 else 40) for n in names} if counts else {}
        ops = {n: ops_per_step(variants[n], cuda) for n in names} if counts else {}
    return medians, costs, reads, ops


def compare_trees(args: argparse.Namespace) -> None:
    """The Monitor's host cost from `--before` beside this tree's: fresh processes, alternated, medians."""
    trees = {"before": args.before, "now": SRC}
    flags = ["--rounds", str(args.rounds), "--steps", str(args.steps), "--device", args.device, "--model", args.model]
    flags += [f for f, on in (("--clip", args.clip),) if on]
    flags += [x for f, v in (("--batch", args.batch), ("--seq", args.seq)) if v for x in (f, str(v))]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    got: dict[str, list[dict[str, Any]]] = {k: [] for k in trees}
    for k in range(args.repeat):
        for label in (list(trees) if k % 2 == 0 else list(trees)[::-1]):
            res = subprocess.run([sys.executable, __file__, "--json", "--src", str(trees[label]), *flags],
                                 capture_output=True, text=True, env=env, check=True)
            got[label].append(json.loads(res.stdout.strip().splitlines()[-1]))
    print(f"host cost of the Monitor (defaults{', grad_norm= passed' if args.clip or args.model == 'gpt2-small' else ''}), "
          f"{args.model} on {args.device}: medians of {args.repeat} fresh processes per tree, each {args.rounds} rounds x "
          f"{args.steps} steps; µs per step")
    print(_COST_HEAD)
    for label, runs in got.items():
        for arm in runs[0]:
            med = {key: statistics.median(r[arm][key] for r in runs) for key in runs[0][arm]}
            print(_cost_row(f"{label}: {arm}", med) + f" {med['ratio']:7.3f}")
    keys = ("call_mean", "call_median", "cpu_mean", "writer")
    now, before = ({key: statistics.median(r["monitor (defaults)"][key] - r["none"].get(key, 0.0) for r in got[t])
                    for key in keys} for t in ("now", "before"))
    print("Monitor's host cost per step, now / before (the none arm's timers taken off): "
          + ", ".join(f"{key} {now[key] / before[key]:.2f}" for key in keys if before[key] > 0))


_COST_HEAD = (f"{'variant':32s} {'call CPU mean':>13s} {'median':>7s} {'hooks CPU':>9s} {'CPU mean':>9s} {'median':>7s} "
              f"{'wall mean':>9s} {'median':>7s} {'p95':>7s} {'writer CPU':>10s} {'other thr':>9s} {'ratio':>7s}")


def _cost_row(name: str, c: dict[str, float]) -> str:
    return (f"{name:32s} {c['call_mean']:13.1f} {c['call_median']:7.1f} {c['hooks_mean']:9.1f} {c['cpu_mean']:9.1f} "
            f"{c['cpu_median']:7.1f} {c['wall_mean']:9.1f} {c['wall_median']:7.1f} {c['wall_p95']:7.1f} "
            f"{c['writer']:10.1f} {c['other']:9.1f}")


def report_cost(names: list[str], costs: dict[str, dict[str, float]], steps: int) -> None:
    print(f"\nhost cost per step, µs, over {steps} steps an arm (mean and median over every step, heavy steps "
          f"included): the training thread inside the monitoring call and its hooks; the threads it started")
    print(_COST_HEAD[:-8])
    for n in names:
        print(_cost_row(n, costs[n]))
    print("(the none arm's figures are the bench's own timers; call: the arm's code after opt.step(); hooks: its "
          "optimizer and forward hooks, which on a CPU include the norms' arithmetic itself)")


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
