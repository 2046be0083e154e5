"""Five loggers that write a run live, each exactly as the real tool prints or writes it.

* `nanogpt`: nanoGPT's `train.py` console (`iter 100: loss 2.3456, time 45.67ms, mfu 0.00%`, every
  iteration; `step 500: train loss 2.1000, val loss 2.3000` at each eval; its start-up lines).
* `hf`: the HF Trainer's console in transformers 4.4x: a tqdm bar on the same stream, the dicts
  `{'loss': 2.3456, 'grad_norm': 1.23, 'learning_rate': 0.0005, 'epoch': 0.1}` every `logging_steps`
  (the loss averaged over the window, with the Trainer's `logging_nan_inf_filter` on, its default),
  `{'eval_loss': ...}` rows and the closing `{'train_runtime': ...}` summary. No step time is printed.
* `wandb`: a W&B-style history JSONL (`_step`, `_runtime`, `_timestamp`, `train/loss`, `train/lr`,
  `train/grad_norm`, `val/loss` merged into the step it was logged at).
* `lightning`: Lightning's CSVLogger `metrics.csv` (columns sorted: epoch, lr-AdamW, step, train_loss,
  val_loss; LearningRateMonitor rows apart; `log_every_n_steps=2`; steps counted from 0).
* `tensorboard`: event files from `torch.utils.tensorboard.SummaryWriter` (train/loss and train/lr
  every 2nd iteration, val/loss at each eval; wall times are the real ones).

Each logger also records what it showed, `rows` (format step, first and last iteration covered, the
loss shown, whether a non-finite value was shown) and `evals` (format step, iteration, value): the
labels are computed from those, in the format's own step numbering.
"""

from __future__ import annotations

import csv
import json
import math
import time
from pathlib import Path
from typing import Any, TextIO

from train import VOCAB, Spec

HF_LOGGING_STEPS = 5
EVERY_2ND = 2


class Shown:
    """What a format showed: the truth its labels are computed from."""

    shows_lr = True
    shows_time = True

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.rows: list[tuple[int, int, int, float, bool]] = []
        self.evals: list[tuple[int, int, float]] = []
        self.file = ""

    def meta(self) -> dict[str, Any]:
        return {"file": self.file, "shows_lr": self.shows_lr, "shows_time": self.shows_time,
                "rows": self.rows, "evals": self.evals}


class NanoGPT(Shown):
    shows_lr = False

    def start(self, s: Spec, info: dict[str, Any]) -> None:
        self.file = "nanogpt.log"
        self.fh: TextIO = open(self.folder / self.file, "w")
        self.spec, self.params, self.local, self.mfu, self.best = s, info["params"], 0, -1.0, 1e9
        decayed = sum(1 for _ in range(2 + 4 * s.n_layer))
        w = self.fh.write
        w(f"Overriding config with config/train_pystdlib_char.py:\n# a tiny character-level model of Python source\n"
          f"out_dir = 'out-pystdlib-char'\neval_interval = {s.eval_interval}\neval_iters = {s.eval_iters}\n"
          f"log_interval = 1\nbatch_size = {s.batch}\nblock_size = {s.block}\nn_layer = {s.n_layer}\n"
          f"n_head = {s.n_head}\nn_embd = {s.n_embd}\nlearning_rate = {s.lr}\nmax_iters = {s.iters}\n"
          f"lr_decay_iters = {s.iters}\nwarmup_iters = {s.warmup}\ndevice = 'cpu'\ncompile = False\n\n")
        w(f"tokens per iteration will be: {s.batch * s.block:,}\n")
        w(f"found vocab_size = {len(VOCAB)} (inside data/pystdlib_char/meta.pkl)\nInitializing a new model from scratch\n")
        w(f"number of parameters: {self.params / 1e6:.2f}M\n")
        w(f"num decayed parameter tensors: {decayed}, with {self.params:,} parameters\n")
        w(f"num non-decayed parameter tensors: {6 + 6 * s.n_layer}, with {(4 + 13 * s.n_layer) * s.n_embd:,} parameters\n")
        w("using fused AdamW: False\n")
        self.fh.flush()

    def step(self, it: int, loss: float, lr: float, grad_norm: float, dt: float) -> None:
        if self.local >= 5:
            s = self.spec
            flops = (6 * self.params + 12 * s.n_layer * s.n_head * (s.n_embd // s.n_head) * s.block) * s.block * s.batch
            mfu = flops / dt / 312e12
            self.mfu = mfu if self.mfu == -1.0 else 0.9 * self.mfu + 0.1 * mfu
        self.fh.write(f"iter {it}: loss {loss:.4f}, time {dt * 1000:.2f}ms, mfu {self.mfu * 100:.2f}%\n")
        self.fh.flush()
        self.local += 1
        self.rows.append((it, it, it, loss, not math.isfinite(loss)))

    def eval(self, it: int, train_loss: float, val_loss: float, seconds: float) -> None:
        self.fh.write(f"step {it}: train loss {train_loss:.4f}, val loss {val_loss:.4f}\n")
        if it > 0 and val_loss < self.best:
            self.fh.write("saving checkpoint to out-pystdlib-char\n")
        self.best = min(self.best, val_loss) if math.isfinite(val_loss) else self.best
        self.evals.append((it, it, val_loss))

    def close(self, info: dict[str, Any]) -> None:
        self.fh.close()


class HFTrainer(Shown):
    shows_time = False

    def start(self, s: Spec, info: dict[str, Any]) -> None:
        from tqdm.auto import tqdm

        self.file = "hf_console.log"
        self.fh: TextIO = open(self.folder / self.file, "w")
        self.spec, self.tqdm = s, tqdm
        self.steps_per_epoch = max(1, info["train_chars"] // (s.batch * s.block))
        self.tr_loss, self.last, self.raw, self.gn = 0.0, 0, [], 0.0
        self.bar = tqdm(total=s.iters + 1, file=self.fh, dynamic_ncols=True)

    def _epoch(self, g: int) -> float:
        return round(g / self.steps_per_epoch, 2)

    def _print(self, logs: dict[str, Any]) -> None:
        self.tqdm.write(str(logs), file=self.fh)

    def step(self, it: int, loss: float, lr: float, grad_norm: float, dt: float) -> None:
        g = it + 1
        if math.isfinite(loss):  # logging_nan_inf_filter=True: a non-finite loss counts as the mean so far
            self.tr_loss += loss
        else:
            self.tr_loss += self.tr_loss / (1 + g - 1 - self.last)
        self.raw.append(loss)
        self.bar.update(1)
        if g % HF_LOGGING_STEPS == 0:
            shown = round(self.tr_loss / (g - self.last), 4)
            self._print({"loss": shown, "grad_norm": grad_norm, "learning_rate": lr, "epoch": self._epoch(g)})
            bad = not (math.isfinite(shown) and math.isfinite(grad_norm))
            self.rows.append((g, self.last, g - 1, shown, bad))
            self.tr_loss, self.last, self.raw = 0.0, g, []

    def eval(self, it: int, train_loss: float, val_loss: float, seconds: float) -> None:
        if it == 0:
            return
        bar = self.tqdm(total=self.spec.eval_iters, leave=False, file=self.fh)
        bar.update(self.spec.eval_iters)
        bar.close()
        n = self.spec.eval_iters * self.spec.batch
        seconds = max(seconds, 1e-4)
        self._print({"eval_loss": val_loss, "eval_runtime": round(seconds, 4),
                     "eval_samples_per_second": round(n / seconds, 3),
                     "eval_steps_per_second": round(self.spec.eval_iters / seconds, 3), "epoch": self._epoch(it)})
        self.evals.append((it, it, val_loss))

    def close(self, info: dict[str, Any]) -> None:
        rt, g = info["runtime"], self.spec.iters + 1
        self._print({"train_runtime": round(rt, 4), "train_samples_per_second": round(g * self.spec.batch / rt, 3),
                     "train_steps_per_second": round(g / rt, 3), "train_loss": info["mean_loss"],
                     "epoch": self._epoch(g)})
        self.bar.close()
        self.fh.close()


class WandbHistory(Shown):
    def start(self, s: Spec, info: dict[str, Any]) -> None:
        self.file = "wandb-history.jsonl"
        self.fh: TextIO = open(self.folder / self.file, "w")
        self.t0, self.pending = time.time(), {}

    def step(self, it: int, loss: float, lr: float, grad_norm: float, dt: float) -> None:
        now = time.time()
        row = {"train/loss": loss, "train/lr": lr, "train/grad_norm": grad_norm, **self.pending, "_step": it,
               "_runtime": round(now - self.t0, 6), "_timestamp": now, "_wandb": {"runtime": int(now - self.t0)}}
        self.fh.write(json.dumps(row) + "\n")
        self.pending = {}
        self.rows.append((it, it, it, loss, not math.isfinite(loss)))

    def eval(self, it: int, train_loss: float, val_loss: float, seconds: float) -> None:
        self.pending = {"val/loss": val_loss}  # logged at this step, committed with it
        self.evals.append((it, it, val_loss))

    def close(self, info: dict[str, Any]) -> None:
        self.fh.close()


class LightningCSV(Shown):
    shows_time = False

    def start(self, s: Spec, info: dict[str, Any]) -> None:
        self.file = "metrics.csv"
        self.records: list[dict[str, Any]] = []
        self.steps_per_epoch = max(1, info["train_chars"] // (s.batch * s.block))

    def step(self, it: int, loss: float, lr: float, grad_norm: float, dt: float) -> None:
        if (it + 1) % EVERY_2ND:
            return
        self.records.append({"lr-AdamW": lr, "step": it})
        self.records.append({"epoch": it // self.steps_per_epoch, "step": it, "train_loss": loss})
        self.rows.append((it, it, it, loss, not math.isfinite(loss)))

    def eval(self, it: int, train_loss: float, val_loss: float, seconds: float) -> None:
        if it == 0:  # the sanity check's validation is not logged
            return
        self.records.append({"epoch": (it - 1) // self.steps_per_epoch, "step": it - 1, "val_loss": val_loss})
        self.evals.append((it - 1, it, val_loss))

    def close(self, info: dict[str, Any]) -> None:
        keys = sorted(set().union(*self.records))
        with open(self.folder / self.file, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=keys)
            w.writeheader()
            w.writerows(self.records)


class TensorBoard(Shown):
    def start(self, s: Spec, info: dict[str, Any]) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.file = "tb"
        self.writer = SummaryWriter(log_dir=str(self.folder / self.file))

    def step(self, it: int, loss: float, lr: float, grad_norm: float, dt: float) -> None:
        if it % EVERY_2ND:
            return
        self.writer.add_scalar("train/loss", loss, it)
        self.writer.add_scalar("train/lr", lr, it)
        self.rows.append((it, it, it, loss, not math.isfinite(loss)))

    def eval(self, it: int, train_loss: float, val_loss: float, seconds: float) -> None:
        self.writer.add_scalar("val/loss", val_loss, it)
        self.evals.append((it, it, val_loss))

    def close(self, info: dict[str, Any]) -> None:
        self.writer.close()


FORMATS = {"nanogpt": NanoGPT, "hf": HFTrainer, "wandb": WandbHistory, "lightning": LightningCSV,
           "tensorboard": TensorBoard}
