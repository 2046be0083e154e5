"""Writers for the synthetic benchmark: one `Trace`, many real log formats.

Each `Variant` writes what one real trainer writes, in its step numbering, logging interval and
reduction: the HF Trainer, Megatron-LM, nanoGPT-style loops and W&B users average the train loss over
the logging interval (Megatron and HF also the step time); TensorBoard-per-step loops and Lightning's
`self.log(on_step=True)` log the last iteration's value. LR, grad norm and loss scale are the last
iteration's everywhere, as every one of these trainers logs them. Evals are logged at their own step.
Metric spellings and step-time units vary per variant (`loss`/`train_loss`/`train/loss`,
`lr`/`learning_rate`, `grad_norm`/`gnorm`/`norm`, `step_ms`/`dt_ms`/`iter_time_s`/`time (ms)`/
`step_time`): the benchmark shows which ones the importers do not read yet. `heldout_only` variants are
written for held-out runs only, so the held-out figure also covers spellings nobody tuned against.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synthetic_train import Trace


@dataclass(frozen=True)
class Variant:
    name: str
    fmt: str  # the format family the scores are reported by: hf, tensorboard, megatron, jsonl, csv
    interval: int
    offset: int  # the logged step of iteration `it` is `it + offset`
    mean: bool  # train loss (and step time) averaged over the interval, else the last iteration's
    keys: dict[str, str] = field(default_factory=dict)  # our name -> this writer's spelling
    heldout_only: bool = False
    console: str = ""  # for fmt "console": the trainer whose console lines are printed (CONSOLE)

    def logged(self, n: int) -> list[int]:
        """The iterations this writer logs a train row at."""
        return [it for it in range(n) if (it + self.offset) % self.interval == 0]

    @property
    def has_step_time(self) -> bool:
        return self.fmt in ("megatron", "tensorboard", "console") or "step_time" in self.keys

    @property
    def has_grad_norm(self) -> bool:
        """nanoGPT's and litgpt's console lines print no grad norm."""
        return self.console not in ("nanogpt", "litgpt")

    @property
    def has_lr(self) -> bool:
        """torchtitan's, nanoGPT's and litgpt's console lines print no learning rate; Composer's prints it
        with 4 decimals (3e-4 reads 0.0003: no schedule to score)."""
        return self.console not in ("torchtitan", "nanogpt", "composer", "litgpt")

    @property
    def has_loss_scale(self) -> bool:
        return self.fmt in ("megatron", "tensorboard") or "loss_scale" in self.keys


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def rows(trace: Trace, v: Variant) -> list[dict[str, Any]]:
    """The train rows this variant logs, in our names: step, loss, lr, grad_norm, step_time (s), loss_scale,
    skipped (iterations skipped in the interval)."""
    out, prev = [], -1
    for it in v.logged(len(trace.loss)):
        window = slice(prev + 1, it + 1) if v.mean else slice(it, it + 1)
        row = {"step": it + v.offset, "loss": _mean(trace.loss[window]), "lr": trace.lr[it],
               "grad_norm": trace.grad_norm[it], "step_time": _mean(trace.step_time[window]),
               "skipped": sum(trace.skipped[prev + 1: it + 1]),
               "nan": sum(not math.isfinite(x) for x in trace.loss[prev + 1: it + 1])}
        if trace.loss_scale:
            row["loss_scale"] = trace.loss_scale[it]
        out.append(row)
        prev = it
    return out


def write_hf(trace: Trace, folder: Path, v: Variant) -> Path:
    """trainer_state.json: steps from 1, the loss averaged over `logging_steps`, bare NaN (Python's json)."""
    n = len(trace.loss)
    hist: list[dict[str, Any]] = []
    evals = {it + v.offset: ev for it, ev in trace.evals}
    for r in rows(trace, v):
        hist.append({"epoch": round(r["step"] / n, 4), "grad_norm": r["grad_norm"], "learning_rate": r["lr"],
                     "loss": round(r["loss"], 4), "step": r["step"]})
        if r["step"] in evals:
            hist.append({"epoch": round(r["step"] / n, 4), "eval_loss": evals.pop(r["step"]), "step": r["step"]})
    hist += [{"epoch": round(s / n, 4), "eval_loss": ev, "step": s} for s, ev in evals.items()]
    hist.sort(key=lambda row: row["step"])  # stable: an eval row stays after its step's train row
    hist.append({"epoch": 1.0, "step": n, "total_flos": 1.0, "train_loss": _mean(trace.loss), "train_runtime": 1.0})
    state = {"best_metric": None, "epoch": 1.0, "global_step": n, "logging_steps": v.interval, "max_steps": n,
             "log_history": hist}
    path = folder / "trainer_state.json"
    path.write_text(json.dumps(state, indent=2))
    return path


def write_tensorboard(trace: Trace, folder: Path, v: Variant) -> Path:
    """An event file through torch's SummaryWriter, with the variant's tags."""
    from torch.utils.tensorboard import SummaryWriter

    k = v.keys
    w = SummaryWriter(log_dir=str(folder))
    for r in rows(trace, v):
        w.add_scalar(k["loss"], r["loss"], r["step"])
        w.add_scalar(k["grad_norm"], r["grad_norm"], r["step"])
        w.add_scalar(k["lr"], r["lr"], r["step"])
        w.add_scalar(k["step_time"], r["step_time"] * _unit(k["step_time"]), r["step"])
        if "loss_scale" in r:
            w.add_scalar(k["loss_scale"], r["loss_scale"], r["step"])
    for it, ev in trace.evals:
        w.add_scalar(k["eval_loss"], ev, it + v.offset)
    w.close()
    return folder


def write_megatron(trace: Trace, folder: Path, v: Variant) -> Path:
    """Megatron-LM iteration lines: loss and time averaged over the interval, iterations from 1; an
    interval holding a NaN prints no `lm loss` and counts it in `number of nan iterations`."""
    n = len(trace.loss)
    batch = 128
    evals = {it + v.offset: ev for it, ev in trace.evals}
    lines = []
    for r in rows(trace, v):
        step = r["step"]
        parts = [(f" iteration {step:8d}/{n:8d} | consumed samples: {step * batch:12d} | "
                  f"elapsed time per iteration (ms): {1000 * r['step_time']:.1f} | learning rate: {r['lr']:.3E} | "
                  f"global batch size: {batch:5d} | ")]
        if not r["nan"]:
            parts.append(f"lm loss: {r['loss']:.6E} | ")
        parts.append(f"loss scale: {r.get('loss_scale', 1.0):.1f} | ")
        if math.isfinite(r["grad_norm"]):
            parts.append(f"grad norm: {r['grad_norm']:.3f} | ")
        skipped = max(r["skipped"], r["nan"])
        parts.append(f"number of skipped iterations: {skipped:3d} | number of nan iterations: {r['nan']:3d} |")
        lines += _megatron_evals(evals, step - 1) + ["".join(parts)] + _megatron_evals(evals, step)
    path = folder / "train.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def _megatron_evals(evals: dict[int, float], upto: int) -> list[str]:
    """The validation blocks of the evals up to that iteration (evals run on their own interval)."""
    out = []
    for at in [e for e in evals if e <= upto]:
        ev = evals.pop(at)
        out += ["-" * 100, (f" validation loss at iteration {at} | lm loss value: {ev:.6E} | "
                            f"lm loss PPL: {math.exp(min(ev, 50)):.6E} | "), "-" * 100]
    return out


def _unit(key: str) -> float:
    """Seconds to the unit a step-time key names."""
    return 1000.0 if "ms" in key else 1.0


def _table(trace: Trace, v: Variant) -> list[dict[str, Any]]:
    """Rows in this variant's spellings; eval rows separate, as a logger call per metric group makes them."""
    k = v.keys
    out = []
    for r in rows(trace, v):
        row = {k["step"]: r["step"], k["loss"]: r["loss"], k["lr"]: r["lr"], k["grad_norm"]: r["grad_norm"]}
        if "step_time" in k:
            row[k["step_time"]] = round(r["step_time"] * _unit(k["step_time"]), 6)
        if "loss_scale" in k and "loss_scale" in r:
            row[k["loss_scale"]] = r["loss_scale"]
        out.append(row)
    for it, ev in trace.evals:
        out.append({k["step"]: it + v.offset, k["eval_loss"]: ev})
    out.sort(key=lambda row: row[k["step"]])
    return out


def write_jsonl(trace: Trace, folder: Path, v: Variant) -> Path:
    """One JSON object per logging call (Python's json: bare NaN)."""
    path = folder / "metrics.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in _table(trace, v)))
    return path


def write_csv(trace: Trace, folder: Path, v: Variant) -> Path:
    """A wide CSV with empty cells for what a row did not log: Lightning's CSVLogger `metrics.csv` (an
    `epoch` column) or a W&B history export (`_step`, `_runtime`, `_timestamp`)."""
    table = _table(trace, v)
    wandb = v.keys["step"] == "_step"
    t0, runtime = 1.7e9, 0.0
    for row in table:
        if wandb:
            runtime = row[v.keys["step"]] * _mean(trace.step_time)
            row["_runtime"], row["_timestamp"] = round(runtime, 3), round(t0 + runtime, 3)
        else:
            row["epoch"] = 0
    header: list[str] = []
    for row in table:
        header += [c for c in row if c not in header]
    path = folder / ("wandb_export.csv" if wandb else "metrics.csv")
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=header)
        w.writeheader()
        w.writerows(table)
    return path


# -- console logs: what trainers print (issue 15). Each prints a train line per logged row and its eval
# line in its own shape; the general console reader must read them without knowing the trainer.
_TOKENS = 64 * 8  # tokens per step the throughput columns are computed with
_ANSI = "\x1b[32m{}\x1b[39m"


def _console_torchtitan(r: dict[str, Any], n: int) -> str:
    """torchtitan train.py: rank/logger prefix, ANSI colours, tps with thousands separators, no LR."""
    tps = _TOKENS / r["step_time"] if r["step_time"] > 0 else 0.0
    return (f"[rank0]:[titan] 2024-07-24 11:20:07,402 - root - INFO - {_ANSI.format('step: ' + str(r['step']))}  "
            f"loss: {r['loss']:7.4f}  grad_norm: {r['grad_norm']:7.4f}  memory:  0.33GiB(1.41%)  "
            f"tps: {tps:,.0f}  tflops: 0.01  mfu: 0.00%")


def _console_llmc(r: dict[str, Any], n: int) -> str:
    """llm.c train_gpt2.cu (2024 printf): `step %4d/%d | train loss %f | norm %.4f | lr %.2e | %.2f ms | …`."""
    ms = 1000 * r["step_time"]
    return (f"step {r['step']:4d}/{n} | train loss {r['loss']:.6f} | norm {r['grad_norm']:.4f} | lr {r['lr']:.2e} "
            f"| {ms:.2f} ms | 0.0% A100 fp16 MFU | {_TOKENS / r['step_time']:.0f} tok/s")


def _console_nanogpt(r: dict[str, Any], n: int) -> str:
    """nanoGPT train.py: `iter %d: loss %.4f, time %.2fms, mfu %.2f%%` (no LR, no grad norm)."""
    return f"iter {r['step']}: loss {r['loss']:.4f}, time {1000 * r['step_time']:.2f}ms, mfu 1.23%"


def _console_keyval(r: dict[str, Any], n: int) -> str:
    """A made-up trainer (held out): a timestamp, then key=value pairs with units in the names."""
    return (f"2025-03-01 12:00:{r['step'] % 60:02d} INFO trainer | global_step={r['step']} loss={r['loss']:.4f} "
            f"lr={r['lr']:.3e} gnorm={r['grad_norm']:.3f} step_ms={1000 * r['step_time']:.1f}")


def _console_pipes(r: dict[str, Any], n: int) -> str:
    """A made-up trainer (held out): `it N/T | key value | …` with units attached to the values."""
    return (f"it {r['step']}/{n} | loss {r['loss']:.4f} | lr {r['lr']:.2e} | grad_norm {r['grad_norm']:.3f} | "
            f"{1000 * r['step_time']:.1f}ms")


def _console_dict(r: dict[str, Any], n: int) -> str:
    """A made-up trainer (held out, written after the detectors' last change and never looked at before
    scoring): a logger prefix and a Python dict repr with the step inside."""
    d = {"iteration": r["step"], "train_loss": round(r["loss"], 4), "lr": r["lr"], "grad_norm": round(r["grad_norm"], 4),
         "step_time_ms": round(1000 * r["step_time"], 2)}
    return f"[metrics] {d}"


def _console_composer(r: dict[str, Any], n: int) -> str:
    """Composer's ConsoleLogger (held out): a `[epoch=E][batch=N/T]:` header, then one metric per line as
    `\\t Train {name}: {value:.4f}` (`format_log_data_value`: floats with 4 decimals), in the order its
    callbacks logged them: the loss, GradMonitor's norm, the LR monitor, SpeedMonitor's throughput."""
    sps = 64 / r["step_time"] if r["step_time"] > 0 else 0.0
    return (f"[epoch=1][batch={r['step']}/{n}]:\n\t Train loss/train/total: {r['loss']:.4f}\n"
            f"\t Train l2_norm/grad/global: {r['grad_norm']:.4f}\n\t Train lr-DecoupledAdamW/group0: {r['lr']:.4f}\n"
            f"\t Train throughput/samples_per_sec: {sps:.4f}")


def _console_litgpt(r: dict[str, Any], n: int) -> str:
    """litgpt pretrain.py (held out): `Epoch E | iter I step S | loss train: %.3f, val: … | iter time: %.2f ms
    (step) remaining time: …`, its iter the step we log (one optimizer step per iter here); no LR, no grad
    norm."""
    left = (n - r["step"]) * r["step_time"]
    val = "n/a" if r.get("last_eval") is None else f"{r['last_eval']:.3f}"  # the last eval's loss, once there is one
    return (f"Epoch 1 | iter {r['step']} step {r['step']} | loss train: {r['loss']:.3f}, val: {val} | iter time: "
            f"{1000 * r['step_time']:.2f} ms (step) remaining time: {int(left // 3600)}:{int(left % 3600 // 60):02d}:"
            f"{int(left % 60):02d}")


_EVAL_LINES = {
    "torchtitan": lambda step, ev: f"[rank0]:[titan] 2024-07-24 11:20:07,402 - root - INFO - validate step: {step}  "
                                   f"loss: {ev:7.4f}",
    "llmc": lambda step, ev: f"val loss {ev:.6f}",
    "nanogpt": lambda step, ev: f"step {step}: train loss {ev:.4f}, val loss {ev:.4f}",
    "keyval": lambda step, ev: f"2025-03-01 12:00:00 INFO trainer | global_step={step} val_loss={ev:.4f}",
    "pipes": lambda step, ev: f"eval it {step} | val loss {ev:.4f}",
    "dict": lambda step, ev: f"[metrics] {{'iteration': {step}, 'val_loss': {round(ev, 4)}}}",
    "litgpt": lambda step, ev: f"iter {step}: val loss {ev:.4f}, val time: 1234.00 ms",
    # Composer: the eval's own batch counter in the header; the metric is LLM Foundry's eval loss
    "composer": lambda step, ev: f"[Eval batch=20/20] Eval on eval data:\n\t Eval metrics/eval/LanguageCrossEntropy: "
                                 f"{ev:.4f}",
}
CONSOLE = {"torchtitan": _console_torchtitan, "llmc": _console_llmc, "nanogpt": _console_nanogpt,
           "keyval": _console_keyval, "pipes": _console_pipes, "dict": _console_dict, "composer": _console_composer,
           "litgpt": _console_litgpt}


def write_console(trace: Trace, folder: Path, v: Variant) -> Path:
    """The trainer's console log: its train lines, its eval lines where evals ran, a warning and a
    progress bar mixed in as real consoles have them."""
    n = len(trace.loss) + v.offset - 1
    evals = dict((it + v.offset, ev) for it, ev in trace.evals)
    line, eval_line = CONSOLE[v.console], _EVAL_LINES[v.console]
    out = ["UserWarning: TypedStorage is deprecated", "Loading checkpoint shards: 100%|##########| 2/2"]
    last_eval = None
    for r in rows(trace, v):
        out.append(line({**r, "last_eval": last_eval}, n))
        for at in [s for s in evals if s <= r["step"]]:
            last_eval = evals.pop(at)
            out.append(eval_line(at, last_eval))
    path = folder / "train.log"
    path.write_text("\n".join(out) + "\n")
    return path


WRITE: dict[str, Callable[[Trace, Path, Variant], Path]] = {
    "hf": write_hf, "tensorboard": write_tensorboard, "megatron": write_megatron, "jsonl": write_jsonl,
    "csv": write_csv, "console": write_console,
}

_TB = {"loss": "train/loss", "grad_norm": "train/grad_norm", "lr": "train/learning_rate",
       "step_time": "perf/step_time_s", "loss_scale": "train/loss_scale", "eval_loss": "eval/loss"}
VARIANTS = [
    Variant("hf-10", "hf", 10, 1, True),
    Variant("tensorboard-1", "tensorboard", 1, 0, False, _TB),
    Variant("megatron-5", "megatron", 5, 1, True),
    Variant("jsonl-nanogpt-1", "jsonl", 1, 0, False,
            {"step": "iter", "loss": "loss", "lr": "lr", "grad_norm": "grad_norm", "step_time": "dt_ms",
             "eval_loss": "val_loss"}),
    Variant("jsonl-accelerate-10", "jsonl", 10, 1, True,
            {"step": "step", "loss": "train_loss", "lr": "learning_rate", "grad_norm": "grad_norm",
             "step_time": "step_time", "loss_scale": "loss_scale", "eval_loss": "eval_loss"}),
    Variant("csv-lightning-10", "csv", 10, 0, False,
            {"step": "step", "loss": "train_loss", "lr": "lr-Adam", "grad_norm": "grad_2.0_norm_total",
             "step_time": "step_ms", "eval_loss": "val_loss"}),
    Variant("csv-wandb-5", "csv", 5, 1, True,
            {"step": "_step", "loss": "train/loss", "lr": "train/learning_rate", "grad_norm": "train/grad_norm",
             "step_time": "perf/iter_time_s", "loss_scale": "train/loss_scale", "eval_loss": "eval/loss"}),
    Variant("csv-trl-20", "csv", 20, 1, True,
            {"step": "train/global_step", "loss": "train/loss", "lr": "train/learning_rate",
             "grad_norm": "train/grad_norm", "step_time": "train/step_time_sec", "eval_loss": "eval/loss"}),
    Variant("console-torchtitan-10", "console", 10, 1, False, console="torchtitan"),
    Variant("console-llmc-1", "console", 1, 1, False, console="llmc"),
    Variant("console-nanogpt-5", "console", 5, 0, False, console="nanogpt"),
    # written for held-out runs only: spellings and intervals no detector was tuned on
    Variant("console-keyval-10", "console", 10, 1, True, console="keyval", heldout_only=True),
    Variant("console-pipes-5", "console", 5, 1, True, console="pipes", heldout_only=True),
    Variant("console-dict-10", "console", 10, 1, True, console="dict", heldout_only=True),
    Variant("console-composer-10", "console", 10, 1, True, console="composer", heldout_only=True),
    Variant("console-litgpt-5", "console", 5, 1, False, console="litgpt", heldout_only=True),
    Variant("hf-25", "hf", 25, 1, True, heldout_only=True),
    Variant("tensorboard-avg-10", "tensorboard", 10, 1, True,
            {"loss": "Loss/train", "grad_norm": "GradNorm", "lr": "LearningRate", "step_time": "Time/step_ms",
             "loss_scale": "LossScale", "eval_loss": "Loss/val"}, heldout_only=True),
    Variant("megatron-10", "megatron", 10, 1, True, heldout_only=True),
    Variant("jsonl-custom-25", "jsonl", 25, 1, True,
            {"step": "global_step", "loss": "train/loss", "lr": "lr", "grad_norm": "gnorm",
             "step_time": "time (ms)", "loss_scale": "scaler/scale", "eval_loss": "eval/loss"}, heldout_only=True),
    Variant("csv-wandb-last-1", "csv", 1, 0, False,
            {"step": "_step", "loss": "loss", "lr": "lr", "grad_norm": "norm", "step_time": "iter_time_s",
             "eval_loss": "val/loss"}, heldout_only=True),
]


def write(trace: Trace, folder: Path, v: Variant) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return WRITE[v.fmt](trace, folder, v)
