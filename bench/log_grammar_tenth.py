"""The tenth held-out part's printed forms (`log_grammar`), from trainers, launchers and tools whose printed shapes
the earlier parts did not hold, written as they print: fairseq's `train_inner` line (`2024-07-24 11:20:33 | INFO |
train_inner | epoch 001:    450 / 1891 loss=9.718, nll_loss=.., ppl=.., wps=.., ups=.., .. num_updates=445, ..
wall=882`: the batch within the epoch is not the update), OpenNMT-py (`[2024-07-24 11:20:33,389 INFO] Step 50/10000;
acc:   0.01; ppl: 9227.77; xent: 9.13; lr: 0.00001; 6909/7255 tok/s;    206 sec`), timm's train.py (`Train: 3 [ 150/1251
( 12%)]  Loss: 6.91 (6.93)  Time: 0.412s,  310.68/s  (..)  LR: 1.000e-03  Data: 0.012 (0.015)`: the epoch from 0,
the update within it), Darknet (`Loaded: 0.000039 seconds`, a blank line, ` 402: 27.874079, 27.874079 avg loss,
0.000068 rate, 9.233807 seconds, 25728 images, 1.5 hours left`), Deeplearning4j's ScoreIterationListener behind
logback (`11:20:33.123 [main] INFO  o.d.o.l.ScoreIterationListener - Score at iteration 10 is 0.7384617312345678`),
torchtitan (`[titan] 2024-07-24 11:20:33,123 - root - INFO - step: 10  loss:  7.62585  grad_norm: ..  memory:
49.66GiB(52.28%)  tps: 5,856  tflops: 339.16  mfu: 34.29%`, colours or not), Keras' `fit` (`Epoch 3/10`, then Keras
3's `469/469 ━━━━ 5s 9ms/step - accuracy: .. - loss: ..`, Keras 2's `[=====]` bar or its verbose=2 line: one record
an epoch), NeMo's Lightning bar (`Epoch 0:   1%|     | 795/77225 [..<.., 1.44it/s, loss=3.1, v_num=,
reduced_train_loss=3.090, global_step=794.0, consumed_samples=2.04e+5]`, numbers as tqdm and Lightning format them)
and NeMo 2's progress printer (`Training epoch 0, iteration 120/149 | lr: 3e-05 | consumed_samples: 121 | .. |
global_step: 120 | reduced_train_loss: 1.233 | train_step_timing in s: 0.03146 | val_loss: 4.106`); Apache's
common-log date, RFC 2822 dates, moreutils `ts -s` (the time since the start), logback's `[main] INFO  logger - `,
Rust's env_logger, honcho/foreman's `11:20:33 trainer.1 | ` and Intel MPI's `-prepend-rank` `[0] ` prefixes; a
Jenkins console with the Timestamper's `[2024-07-24T11:20:33.123Z] ` on each line; fairseq's end-of-epoch summary,
timm's `Current checkpoints:`, Keras' HDF5 warning, torchtitan's profiler and GC lines and Darknet's resizing lines
between the records.

Each function takes the tenth part's names and hands any other to `log_grammar_ninth` (the parts before render as
they did). Scored once: 75.70% recovered, 3.10% refused, 13.10% partial, 8.10% misread (162 of 2,000 logs); then
tuned on: it is spent (SPENT10)."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import log_grammar_forms as forms
import log_grammar_ninth as ninth

FORCED = ninth.FORCED
EPOCH_ONLY = {**ninth.EPOCH_ONLY, "keras_epoch": 1}  # one record an epoch, from epoch 1: the step is the epoch
EPOCHAL = ninth.EPOCHAL
HEADED = ninth.HEADED
COUNTERS = ("fairseq_inner", "opennmt_step", "timm_train", "darknet_iter", "dl4j_score", "titan_step", "keras_epoch",
            "nemo_bar", "nemo2_iter")  # records under their own names (the drawn loss name and extras not used)
NEW = (*ninth.NEW, *COUNTERS)  # the counters of the sixth .. tenth parts (records built here)

DATES = ["apache_clf", "rfc2822", "ts_since"]
LOGGERS = ["logback_main", "env_logger"]
RANKS = ["honcho_proc", "intelmpi_rank"]
DRESS = ["jenkins_ts"]
LOSS_NAMES = ["batch_loss", "objective", "loss/train/total"]
CADENCES = ["9", "48", "512"]
EVALS = ["fairseq_valid", "opennmt_valid", "timm_test"]
BETWEEN = ["fairseq_epoch_end", "timm_ckpt", "keras_hdf5_warning", "titan_profiler", "titan_gc", "darknet_resize"]
_EPOCHS = ("epoch_header", "ds_chat_epoch", "fairseq_epoch_end")  # lines that name an epoch (see `between`)


def _hms(t: int) -> tuple[int, int, int]:
    return 11 + t // 3600 % 12, t // 60 % 60, t % 60


def _when(t: int) -> str:
    h, m, s = _hms(t)
    return f"2024-07-24 {h:02d}:{m:02d}:{s:02d}"


def date(kind: str, t: int) -> str:
    h, m, s = _hms(t)
    out = {"apache_clf": f"[24/Jul/2024:{h:02d}:{m:02d}:{s:02d} +0000] ",
           "rfc2822": f"Wed, 24 Jul 2024 {h:02d}:{m:02d}:{s:02d} +0000 ",
           "ts_since": f"{t // 3600 % 24:02d}:{t // 60 % 60:02d}:{t % 60:02d}.{t * 7919 % 1_000_000:06d} "}.get(kind)
    return ninth.date(kind, t) if out is None else out


def logger(kind: str) -> str:
    out = {"logback_main": "[main] INFO  ai.trainer.Train - ", "env_logger": "[2024-07-24T11:20:33Z INFO  train] "}.get(kind)
    return ninth.logger(kind) if out is None else out


def rank(kind: str, t: int = 0) -> str:
    h, m, s = _hms(t)
    out = {"honcho_proc": f"{h:02d}:{m:02d}:{s:02d} trainer.1 | ", "intelmpi_rank": "[0] "}.get(kind)
    return ninth.rank(kind) if out is None else out


def dress(kind: str, text: str) -> str:
    """The log as saved: a Jenkins pipeline's console with the Timestamper's time before each line of the steps'
    output (the `[Pipeline]` lines and the build's first and last lines carry none)."""
    if kind != "jenkins_ts":
        return ninth.dress(kind, text)
    lines = ["[Pipeline] Start of Pipeline", "[Pipeline] node", "Running on gpu-agent-1 in /var/lib/jenkins/workspace/train",
             "[Pipeline] {", "[Pipeline] sh", "+ python train.py", *text.split("\n")[:-1], "[Pipeline] }",
             "[Pipeline] // node", "[Pipeline] End of Pipeline"]
    start = datetime(2024, 7, 24, 11, 20, 33, tzinfo=timezone.utc)
    out = ["Started by user admin\n"]
    for k, line in enumerate(lines):
        at = start + timedelta(milliseconds=k * 1373 + k * k % 97)
        stamp = "" if line.startswith("[Pipeline] ") else f"[{at.strftime('%Y-%m-%dT%H:%M:%S')}.{at.microsecond // 1000:03d}Z] "
        out.append(f"{stamp}{line}\n")
    return "".join(out) + "Finished: SUCCESS\n"


def table_header(kind: str) -> str:
    return ninth.table_header(kind)


def _ptl(x: float) -> str:
    """A number in Lightning's progress bar: tqdm's `format_num`, then padded to 5 characters unless in e-notation."""
    f = f"{x:.3g}".replace("+0", "+").replace("-0", "-")
    n = f if len(f) < len(str(x)) else str(x)
    if "e" in n:
        return n
    if "." not in n and len(n) < 5:
        n += "."
    return n + "0" * (5 - len(n))


def loss_text(kind: str, r: forms.Rand) -> str:
    """The train loss as this counter's trainer prints it."""
    if kind not in COUNTERS:
        return ninth.loss_text(kind, r)
    value = 2.0 + 3.0 * r.random()
    return {"fairseq_inner": f"{value * 2:.3f}", "opennmt_step": f"{value:4.2f}", "timm_train": f"{value / 2:#.3g}",
            "darknet_iter": f"{value * 2:f}", "dl4j_score": f"{value / 3!r}", "titan_step": f"{value * 2:8.5f}",
            "keras_epoch": f"{value / 4:.4f}", "nemo_bar": _ptl(value / 1.5), "nemo2_iter": f"{round(value / 2.5, 3)!r}"}[kind]


def _interval(s: int) -> str:
    """tqdm's elapsed and remaining times."""
    return f"{s // 3600:d}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60:02d}:{s % 60:02d}"


def record(kind: str, step: int, total: int, per_epoch: int, r: forms.Rand, fields: list[str], sep: str,
           loss: str, cadence: int) -> str:
    """A record of a tenth-part counter (or an earlier one), as its trainer prints it."""
    if kind not in COUNTERS:
        return ninth.record(kind, step, total, per_epoch, r, fields, sep, loss, cadence)
    epoch, batch = step // per_epoch, step % per_epoch  # the epoch from 0, the update within it
    t = 0.2 + r.random() * 0.3
    v = float(loss)
    if kind == "fairseq_inner":  # the iterator's batch (updates skipped on fp16 overflow count) is not the update
        wpb = 2000 + int(r.random() * 3000)
        return (f"{_when(step * 3)} | INFO | train_inner | epoch {epoch + 1:03d}:  {batch + min(step // 97, 9) + 1:5d} / "
                f"{per_epoch + 10} loss={loss}, nll_loss={v - 0.3:.3f}, ppl={2 ** (v - 0.3):.2f}, wps={wpb / t:.1f}, "
                f"ups={1 / t:.2f}, wpb={wpb}, bsz={wpb // 30}, num_updates={step}, lr={5e-4 * min(1, (step + 1) / 4000):g}, "
                f"gnorm={0.5 + r.random():.3f}, loss_scale={2 ** (step % 5 + 3)}, train_wall={int(t * cadence)}, "
                f"gb_free={10 + r.random() * 5:.1f}, wall={int(step * t * 1.1)}")
    if kind == "opennmt_step":  # xent is the loss; ppl its exp; the seconds a clock since the start
        return (f"[{_when(step * 3)},{step * 7919 % 1000:03d} INFO] Step {step:2d}/{total:5d}; acc: {10 + 50 * r.random():6.2f}; "
                f"ppl: {math.exp(v):5.2f}; xent: {loss}; lr: {1e-3 * min(1.0, step / 8000 + 0.01):7.5f}; "
                f"{int(5000 / t)}/{int(5200 / t)} tok/s; {step * t * 3:6.0f} sec")
    if kind == "timm_train":
        avg = t * 1.02
        return (f"Train: {epoch} [{batch:>4d}/{per_epoch} ({100 * (batch + 1) / per_epoch:>3.0f}%)]  Loss: {loss} "
                f"({v * 1.01 + 0.005:#.3g})  Time: {t:.3f}s, {128 / t:>7.2f}/s  ({avg:.3f}s, {128 / avg:>7.2f}/s)  "
                f"LR: {1e-3 * 0.99 ** epoch:.3e}  Data: {t / 30:.3f} ({t / 28:.3f})")
    if kind == "darknet_iter":  # the loss, its moving average; images: a sample count
        return (f"Loaded: {r.random() / 5000:f} seconds\n\n {step}: {loss}, {v * 1.03 + 0.01:f} avg loss, "
                f"{0.001 * min(1.0, (step / 1000) ** 4):f} rate, {t * 10:f} seconds, {step * 64} images, "
                f"{(total - step) * t * 10 / 3600:f} hours left")
    if kind == "dl4j_score":
        h, m, s = _hms(step * 3)
        return (f"{h:02d}:{m:02d}:{s:02d}.{step * 37 % 1000:03d} [main] INFO  o.d.o.l.ScoreIterationListener - "
                f"Score at iteration {step} is {loss}")
    if kind == "titan_step":  # colours where the terminal had them
        c = (lambda code: f"\x1b[{code}m") if per_epoch % 2 == 0 else (lambda code: "")
        mfu = 30 + r.random() * 10
        return (f"[titan] {_when(step * 3)},{step * 7919 % 1000:03d} - root - INFO - {c(31)}step: {step:2}  {c(32)}loss: "
                f"{loss}  {c(33)}grad_norm: {0.3 + r.random():7.4f}  {c(36)}memory: {40 + per_epoch % 20 + 0.66:5.2f}GiB"
                f"({50 + per_epoch % 30 + 0.28:.2f}%)  {c(34)}tps: {int(32768 / t):,}  {c(36)}tflops: {mfu * 9.89:,.2f}  "
                f"{c(35)}mfu: {mfu:.2f}%{c(39)}")
    if kind == "keras_epoch":  # `Epoch N/M`, then the epoch's line (its batches: not the step)
        secs, ms, acc = max(1, int(per_epoch * t)), int(t * 1000), f"{0.5 + r.random() / 2:.4f}"
        val, va, vl = per_epoch % 2 == 1, f"{0.5 + r.random() / 2:.4f}", f"{v * 1.1:.4f}"
        if per_epoch % 3 == 0:  # Keras 3: its metrics in alphabetical order
            line = (f"{'━' * 20} {secs}s {ms}ms/step - accuracy: {acc} - loss: {loss}"
                    + (f" - val_accuracy: {va} - val_loss: {vl}" if val else ""))
        elif per_epoch % 3 == 1:  # Keras 2
            line = (f"[{'=' * 30}] - {secs}s {ms}ms/step - loss: {loss} - accuracy: {acc}"
                    + (f" - val_loss: {vl} - val_accuracy: {va}" if val else ""))
        else:  # verbose=2
            line = f"- {secs}s - loss: {loss} - {secs}s/epoch - {ms}ms/step"
        return f"Epoch {step}/{total // 2}\n{per_epoch}/{per_epoch} {line}"
    if kind == "nemo_bar":  # the bar counts the epoch's batches from 1; global_step from 0, a float as Lightning prints it
        b = batch + 1
        bar = ("█" * (10 * b // per_epoch)).ljust(10)
        return (f"Epoch {epoch}: {100 * b / per_epoch:3.0f}%|{bar}| {b}/{per_epoch} [{_interval(int(b * t))}<"
                f"{_interval(int((per_epoch - b) * t))}, {1 / t:.2f}it/s, loss={v * 1.02:.3g}, "
                f"v_num={'' if per_epoch % 2 else per_epoch % 7}, reduced_train_loss={loss}, global_step={_ptl(float(step))}, "
                f"consumed_samples={_ptl(float((step + 1) * 256))}]")
    if kind == "nemo2_iter":  # val_loss: the last validation's
        gbs = 8 * (1 + per_epoch % 4)
        val = "" if step < 2 * cadence else f" | val_loss: {round(v * 1.07 + 0.1, 3)!r}"
        return (f"Training epoch {epoch}, iteration {step}/{total - 1} | lr: {round(3e-4 * min(1.0, (step + 1) / 2000), 8)!r} | "
                f"consumed_samples: {(step + 1) * gbs} | global_batch_size: {gbs} | global_step: {step} | "
                f"reduced_train_loss: {loss} | train_step_timing in s: {round(t, 5)!r}{val}")
    raise KeyError(kind)


def eval_line(kind: str, step: int, value: str, kv: str, counter: str = "") -> str:
    v = float(value)
    if kind == "fairseq_valid":
        return (f"{_when(step * 3 + 1)} | INFO | valid | epoch {1 + step // 1000:03d} | valid on 'valid' subset | loss {v:.3f} | "
                f"nll_loss {v - 0.3:.3f} | ppl {2 ** (v - 0.3):.2f} | wps {30000 + step % 977 * 7:.1f} | wpb {2811.4:.1f} | "
                f"bsz {96.3:.1f} | num_updates {step} | best_loss {v - step % 7 / 100:.3f}")
    if kind == "opennmt_valid":
        when = f"[{_when(step * 3 + 1)},{step * 7 % 1000:03d} INFO]"
        return f"{when} Validation perplexity: {math.exp(v):g}\n{when} Validation accuracy: {40 + step % 37 / 2:g}"
    if kind == "timm_test":  # the eval's batches (`[ 390/390]`) are not the step; the last average is the eval loss
        first, top1 = v * 0.93, 70 + step % 13
        return (f"Test: [   0/390]  Time: 1.214 (1.214)  Loss: {first:>7.3f} ({first:>6.3f})  Acc@1: {top1 + 5:>7.3f} "
                f"({top1 + 5:>7.3f})  Acc@5: {95.0:>7.3f} ({95.0:>7.3f})\nTest: [ 390/390]  Time: 0.072 (0.105)  Loss: "
                f"{v * 1.2:>7.3f} ({v:>6.3f})  Acc@1: {top1 - 3:>7.3f} ({top1:>7.3f})  Acc@5: {92.5:>7.3f} ({93.1:>7.3f})")
    return ninth.eval_line(kind, step, value, kv, counter)


def between(kind: str, step: int, r: forms.Rand, counter: str = "") -> str:
    """A line printed between the records (by another tool). Where the epoch is only in a header (MONAI's `epoch 2/5`
    under a rule), a line that names another epoch would make the step unknowable: it prints blank there."""
    if kind not in _BETWEEN:
        return ninth.between(kind, step, r, counter)
    line = _BETWEEN[kind](step, int(r.random() * 100))
    return "" if counter == "monai_batch" and kind in _EPOCHS else line


def _titan(t: int) -> str:
    return f"[titan] {_when(t)},{t * 7919 % 1000:03d} - root - INFO - "


_BETWEEN = {
    "fairseq_epoch_end": lambda step, n: (
        f"{_when(step * 3 + 2)} | INFO | fairseq_cli.train | end of epoch {1 + step // 1000} (average epoch stats below)\n"
        f"{_when(step * 3 + 2)} | INFO | train | epoch {1 + step // 1000:03d} | loss {4 + n / 40:.3f} | nll_loss {3.7 + n / 40:.3f} | "
        f"ppl {2 ** (3.7 + n / 40):.2f} | wps {12000 + n * 7:.1f} | ups {2 + n / 100:.2f} | wpb {2811:.1f} | bsz {96:.1f} | "
        f"num_updates {step} | lr {5e-4 * min(1, (step + 1) / 4000):g} | gnorm {0.9 + n / 500:.3f} | train_wall {step // 3} | "
        f"gb_free {12.5:.1f} | wall {step // 2}\n"
        f"{_when(step * 3 + 2)} | INFO | fairseq.trainer | begin training epoch {2 + step // 1000}"),
    "timm_ckpt": lambda step, n: (f"Current checkpoints:\n ('./output/train/20240724-112033-resnet50-224/checkpoint-"
                                  f"{n % 9 + 1}.pth.tar', {70 + n / 13!r})\n ('./output/train/20240724-112033-resnet50-224/"
                                  f"checkpoint-{n % 9}.pth.tar', {69 + n / 17!r})\n"),
    "keras_hdf5_warning": lambda step, n: (
        "WARNING:absl:You are saving your model as an HDF5 file via `model.save()` or `keras.saving.save_model(model)`. "
        "This file format is considered legacy. We recommend using instead the native Keras format, e.g. "
        "`model.save('my_model.keras')` or `keras.saving.save_model(model, 'my_model.keras')`. "),
    "titan_profiler": lambda step, n: (f"{_titan(step * 3 + 1)}Dumping profiler traces at step {step}\n"
                                       f"{_titan(step * 3 + 2)}Finished dumping profiler traces in {0.1 + n / 500:.2f} seconds"),
    "titan_gc": lambda step, n: f"{_titan(step * 3 + 2)}[GC] Peforming periodical GC collection. {0.05 + n / 1000:.2f} seconds.",
    "darknet_resize": lambda step, n: (f"Resizing, random_coef = 1.40 \n\n {320 + 32 * (n % 10)} x {320 + 32 * (n % 10)} \n"
                                       f" try to allocate additional workspace_size = {52.43 + n:.2f} MB \n CUDA allocate done! "),
}


def extra(kind: str, r: forms.Rand, kv: str, step: int) -> tuple[str, bool] | None:
    """A tenth-part metric as printed (whether it is a step time), or an earlier part's, or None for the others."""
    if kind not in _EXTRAS:
        return ninth.extra(kind, r, kv, step)
    return _EXTRAS[kind](r, kv, 0.2 + r.random() * 0.3, step)


_EXTRAS = {
    "tps_thousands": lambda r, kv, t, step: (f"tps{kv}{int(32768 / t):,}", False),  # thousands separated by commas
    "consumed_samples": lambda r, kv, t, step: (f"consumed_samples{kv}{float((step + 1) * 256)}", False),  # not the step
    "ups_rate": lambda r, kv, t, step: (f"ups{kv}{1 / t:.2f}", True),  # updates a second: the step time's inverse
    "mem_gib_pct": lambda r, kv, t, step: (f"memory{kv}{40 + t * 20:.2f}GiB({50 + t * 30:.2f}%)", False),
}
EXTRAS = list(_EXTRAS)
