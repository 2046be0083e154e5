"""Labelled synthetic runs for `diagnosis_accuracy.py --synthetic`: REAL tiny training runs with faults.

A character-level MLP language model (8 characters of context, ~120k parameters) trains on text from
Python's own standard library, on the CPU with one thread. Each scenario injects one fault at a known
iteration, and every run is written through real writers:

* an HF-style `trainer_state.json` (Python's `json`, so NaN is written bare; loss averaged over the
  logging interval as the Trainer does; steps counted from 1),
* a TensorBoard event file (`torch.utils.tensorboard.SummaryWriter`; steps from 0),
* Megatron-style iteration lines (values averaged over the log interval; a NaN iteration prints no
  `lm loss` field and counts itself in `number of nan iterations`; iterations from 1).

Labels are the injected faults, in each writer's own step numbering (an event at one iteration is
labelled at the first log line whose interval holds it); where the truth is a measured fact (the eval
minimum of an overfitting run, the first non-finite loss of a diverging run, the first loss above
every pre-fault loss after an LR jump) it is measured on the raw per-iteration data, never on the
diagnosis. Step times are real wall-clock times, so throughput is only labelled where stalls are
injected (`unscored` elsewhere).
"""

from __future__ import annotations

import inspect
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STEPS = 1200
CONTEXT = 8
BATCH = 128
HIDDEN = 512  # ~5 ms steps on one CPU thread: long enough that OS jitter is not the whole story


@dataclass
class Trace:
    """What one training run produced, per iteration (0-based)."""

    loss: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    step_time: list[float] = field(default_factory=list)
    evals: list[tuple[int, float]] = field(default_factory=list)  # (iteration, eval loss)


@dataclass
class Scenario:
    name: str
    labels: Callable[[Trace], list[tuple[str, int | None]]]  # (type, iteration) in 0-based iterations
    lr: float = 3e-3
    train_chars: int | None = None
    eval_every: int = 100
    fault: Callable[[int], str | None] = lambda i: None
    lr_at: Callable[[int, float], float] = lambda i, lr: lr
    healthy: bool = False


def _corpus() -> str:
    """~1 MB of Python source from the standard library: enough text that 1200 steps do not overfit."""
    import importlib

    names = ("collections", "dataclasses", "textwrap", "json.decoder", "json.encoder", "argparse", "inspect",
             "typing", "pathlib", "logging", "subprocess", "threading", "tarfile", "zipfile", "email.message",
             "http.client", "urllib.request", "pydoc", "difflib", "decimal", "fractions", "statistics", "calendar",
             "configparser", "shutil", "tempfile", "ast", "dis", "pickle", "functools", "enum", "unittest.case")
    out = []
    for name in names:
        try:
            out.append(inspect.getsource(importlib.import_module(name)))
        except (ImportError, OSError, TypeError):
            continue
    return "".join(out)


def _first_nonfinite(xs: list[float]) -> int | None:
    return next((i for i, x in enumerate(xs) if not math.isfinite(x)), None)


def _scenarios() -> list[Scenario]:
    def high_lr_labels(t: Trace) -> list[tuple[str, int | None]]:
        # LR x30 at iteration 600: the loss jumps (a spike) and never comes back (a divergence); labelled
        # both, as the BigScience chronicles label the same pattern (tr8 exp1, exp12). The spike's step is
        # measured on the raw losses: the first iteration above every loss of the 50 before the fault.
        # The first loss the fault can touch is iteration 601's (600's loss is computed before its update).
        before = max(t.loss[550:600])
        jump = next((i for i in range(600, len(t.loss)) if t.loss[i] > before), None)
        out: list[tuple[str, int | None]] = [("divergence", 601)]
        if jump is not None:
            out.append(("loss_spike", jump))
        bad = _first_nonfinite(t.loss)
        if bad is not None:
            out.append(("nan", bad))
        return out

    def overfit_labels(t: Trace) -> list[tuple[str, int | None]]:
        best = min(t.evals, key=lambda e: e[1])
        return [("overfitting", best[0])] if best[0] < t.evals[-1][0] else []

    return [
        Scenario("healthy", lambda t: [], healthy=True),
        Scenario("lr_too_high", high_lr_labels, lr_at=lambda i, lr: lr * 30 if i >= 600 else lr),
        Scenario("nan_batch", lambda t: [("nan", 700)], fault=lambda i: "nan" if i == 700 else None),
        Scenario("garbage_batch", lambda t: [("loss_spike", 800)], fault=lambda i: "garbage" if i == 800 else None),
        Scenario("tiny_dataset", overfit_labels, train_chars=400, eval_every=25),
        Scenario("lr_too_low", lambda t: [("plateau", 0)], lr=1e-6),
        Scenario("gc_pauses", lambda t: [("throughput_drop", 500)], fault=lambda i: "pause" if i >= 500 and i % 50 == 0 else None),
    ]


def train(sc: Scenario, text: str, steps: int = STEPS, seed: int = 0) -> Trace:
    """Train the tiny model for one scenario and record every iteration."""
    import torch

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(seed)
    chars = sorted(set(text))
    idx = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([idx[c] for c in text], dtype=torch.long)
    chunks = data[: len(data) // 1000 * 1000].view(-1, 1000)  # every 10th chunk of 1000 characters is held out
    train_data = chunks[torch.arange(len(chunks)) % 10 != 0].reshape(-1)
    eval_data = chunks[::10].reshape(-1)
    if sc.train_chars is not None:
        train_data = train_data[: sc.train_chars]
    vocab = len(chars)
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Embedding(vocab, 16), torch.nn.Flatten(), torch.nn.Linear(16 * CONTEXT, HIDDEN), torch.nn.GELU(),
        torch.nn.Linear(HIDDEN, vocab),
    )
    opt = torch.optim.Adam(model.parameters(), lr=sc.lr)
    trace = Trace()
    eval_set: list[tuple[Any, Any]] = []

    windows = {id(d): d.unfold(0, CONTEXT + 1, 1) for d in (train_data, eval_data)}

    def batch(source: Any) -> tuple[Any, Any]:
        w = windows[id(source)]
        rows = w[torch.randint(0, len(w), (BATCH,), generator=g)]
        return rows[:, :-1], rows[:, -1]

    eval_set.extend(batch(eval_data) for _ in range(16))  # a fixed held-out set, as real evals use
    for it in range(steps):
        t0 = time.perf_counter()
        lr = sc.lr_at(it, sc.lr)
        for group in opt.param_groups:
            group["lr"] = lr
        fault = sc.fault(it)
        x, y = batch(train_data)
        if fault == "garbage":
            x = torch.randint(0, vocab, x.shape, generator=g)
            y = torch.randint(0, vocab, y.shape, generator=g)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        if fault == "nan":
            loss = loss * float("nan")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
        opt.step()
        if fault == "pause":
            time.sleep(0.03)  # a stop-the-world pause (GC, a synchronous save) inside the step
        trace.loss.append(loss.item())  # host sync: a benchmark, not a training loop
        trace.grad_norm.append(gn.item())
        trace.lr.append(lr)
        trace.step_time.append(time.perf_counter() - t0)
        if (it + 1) % sc.eval_every == 0:
            with torch.no_grad():
                losses = [torch.nn.functional.cross_entropy(model(bx), by).item() for bx, by in eval_set]
            trace.evals.append((it, sum(losses) / len(losses)))
    return trace


# -- writers --------------------------------------------------------------------------------------
def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def write_hf(trace: Trace, folder: Path, interval: int = 10) -> Path:
    """trainer_state.json as the HF Trainer writes it: steps from 1, train loss averaged per interval."""
    folder.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    evals = dict(trace.evals)
    n = len(trace.loss)
    for it in range(n):
        step = it + 1
        if step % interval == 0:
            lo = it + 1 - interval
            rows.append({"epoch": round(step / n, 4), "grad_norm": trace.grad_norm[it],
                         "learning_rate": trace.lr[it], "loss": round(_mean(trace.loss[lo: it + 1]), 4), "step": step})
        if it in evals:
            rows.append({"epoch": round(step / n, 4), "eval_loss": evals[it], "step": step})
    rows.append({"epoch": 1.0, "step": n, "total_flos": 1.0, "train_loss": _mean(trace.loss), "train_runtime": 1.0})
    state = {"best_metric": None, "epoch": 1.0, "global_step": n, "logging_steps": interval, "max_steps": n,
             "log_history": rows}
    path = folder / "trainer_state.json"
    path.write_text(json.dumps(state, indent=2))  # Python's json: bare NaN, like the Trainer
    return path


def write_tensorboard(trace: Trace, folder: Path) -> Path:
    """A TensorBoard event file through torch's SummaryWriter: every iteration, steps from 0."""
    from torch.utils.tensorboard import SummaryWriter

    folder.mkdir(parents=True, exist_ok=True)
    w = SummaryWriter(log_dir=str(folder))
    for it, (lo, gn, lr, st) in enumerate(zip(trace.loss, trace.grad_norm, trace.lr, trace.step_time)):
        w.add_scalar("train/loss", lo, it)
        w.add_scalar("train/grad_norm", gn, it)
        w.add_scalar("train/learning_rate", lr, it)
        w.add_scalar("perf/step_time_s", st, it)
    for it, ev in trace.evals:
        w.add_scalar("eval/loss", ev, it)
    w.close()
    return folder


def write_megatron(trace: Trace, folder: Path, interval: int = 5) -> Path:
    """Megatron-LM iteration lines: averages over the log interval, iterations from 1, a NaN iteration
    drops the `lm loss` field and is counted in `number of nan iterations`."""
    folder.mkdir(parents=True, exist_ok=True)
    n = len(trace.loss)
    lines = []
    evals = dict(trace.evals)
    for it in range(n):
        step = it + 1
        if step % interval == 0:
            window = trace.loss[it + 1 - interval: it + 1]
            finite = [x for x in window if math.isfinite(x)]
            nan_count = len(window) - len(finite)
            ms = 1000 * _mean(trace.step_time[it + 1 - interval: it + 1])
            gn = trace.grad_norm[it]
            parts = [f" iteration {step:8d}/{n:8d} | consumed samples: {step * BATCH:12d} | "
                     f"elapsed time per iteration (ms): {ms:.1f} | learning rate: {trace.lr[it]:.3E} | "
                     f"global batch size: {BATCH:5d} | "]
            if finite and not nan_count:
                parts.append(f"lm loss: {_mean(finite):.6E} | ")
            parts.append("loss scale: 1.0 | ")
            if math.isfinite(gn):
                parts.append(f"grad norm: {gn:.3f} | ")
            parts.append(f"number of skipped iterations: {nan_count:3d} | number of nan iterations: {nan_count:3d} |")
            lines.append("".join(parts))
        if it in evals:
            lines.append("-" * 100)
            lines.append(f" validation loss at iteration {step} | lm loss value: {evals[it]:.6E} | "
                         f"lm loss PPL: {math.exp(min(evals[it], 50)):.6E} | ")
            lines.append("-" * 100)
    path = folder / "train.log"
    path.write_text("\n".join(lines) + "\n")
    return path


WRITERS: dict[str, tuple[Callable[[Trace, Path], Path], int, int]] = {
    # name: (writer, logging interval in iterations, step of iteration 0)
    "hf": (write_hf, 10, 1),
    "tensorboard": (write_tensorboard, 1, 0),
    "megatron": (write_megatron, 5, 1),
}


def _grad_exploded(t: Trace, interval: int) -> bool:
    """Does the grad norm this writer logs (the last iteration of each interval) reach 10x its median of the
    50 iterations before the fault? Measured on what the log shows, not on the diagnosis."""
    logged = [i for i in range(len(t.grad_norm)) if (i + 1) % interval == 0]
    before = sorted(t.grad_norm[i] for i in logged if 550 <= i < 600)
    if not before:
        return False
    ref = before[len(before) // 2]
    return any(math.isfinite(t.grad_norm[i]) and t.grad_norm[i] >= 10 * ref for i in logged if i >= 600)


def _logged_step(kind: str, it: int | None, interval: int, offset: int) -> int | None:
    """The label's step in the writer's own numbering. An event at one iteration (a NaN, a bad batch, a
    pause) shows first on the log line whose interval holds it; evals are logged at their own step."""
    if it is None:
        return None
    step = it + offset
    if kind in ("nan", "loss_spike", "throughput_drop", "plateau"):
        return max(interval, -(-step // interval) * interval) if interval > 1 else step
    return step


def generate(workdir: Path, steps: int = STEPS) -> list[dict[str, Any]]:
    """Train every scenario once, write it through every writer; returns bench cases with labels."""
    text = _corpus()
    cases = []
    for sc in _scenarios():
        trace = train(sc, text, steps)
        truth = sc.labels(trace)
        for wname, (writer, interval, offset) in WRITERS.items():
            if sc.name == "gc_pauses" and wname == "hf":
                continue  # the HF Trainer's log_history has no per-step time
            path = writer(trace, workdir / f"{sc.name}-{wname}")
            labels = [{"type": t, "step": _logged_step(t, it, interval, offset), "note": sc.name, "confidence": "high"}
                      for t, it in truth]
            if sc.name == "lr_too_high" and _grad_exploded(trace, interval):
                labels.append({"type": "grad_explosion", "step": None, "confidence": "high",
                               "note": "the logged grad norm reached 10x its pre-fault median after the LR jump"})
            if sc.healthy:
                labels.append({"type": "healthy", "step": None, "note": "no fault injected", "confidence": "high"})
            unscored = [] if sc.name == "gc_pauses" else ["throughput_drop"]  # real wall-clock jitter: no truth
            cases.append({"case": f"synthetic_{sc.name}_{wname}", "path": str(path), "labels": labels,
                          "unscored": unscored})
    return cases


if __name__ == "__main__":
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        out = generate(Path(d), int(sys.argv[1]) if len(sys.argv) > 1 else STEPS)
        for c in out:
            print(c["case"], c["labels"])
        print(f"{len(out)} cases in {time.perf_counter() - t0:.1f} s")
