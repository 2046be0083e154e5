"""The eighth held-out part's printed forms (`log_grammar`), from trainers, launchers and loggers whose printed
shapes the reader's code did not name, written as they print: PyTorch's word_language_model example (`| epoch   1 |
  200/ 2983 batches | lr 20.00 | ms/batch 45.67 | loss  7.63 | ppl  2065.59`, its `| end of epoch` line), Flair's
ModelTrainer (`epoch 1 - iter 140/149 - loss 8.73351908 - samples/sec: 70.85 - lr: 0.100000`, `DEV : loss ...`),
Coqui TTS's trainer (`   --> TIME: ... -- STEP: 24/406 -- GLOBAL_STEP: 25`, then `     | > loss: 0.56  (0.60)` a
line a value), MATLAB's trainNetwork verbose table (`|  Epoch  |  Iteration  |  Time Elapsed  | ...`), spaCy's
`spacy train` table (`E    #       LOSS TEXTCAT  CATS_SCORE  SCORE`), the TensorFlow Object Detection API (`Step 100
per-step time 1.375s`, then its loss dict over lines, `'Loss/total_loss': 0.76`), scikit-learn's SGD verbose output
(`-- Epoch 1` / `Norm: 1.59, NNZs: 2, Bias: 1.94, T: 1000, Avg. loss: 0.66`), icefall's train line (`Epoch 1, batch
10, global_batch_idx: 110, batch size: 4, loss[loss=0.4561, over 2828.00 frames. ], tot_loss[...]`), Flux.jl's
`[ Info: Epoch 3` with a `loss(x, y) = 4.2778687f0` line; Python logging's `%(relativeCreated)6d %(threadName)s`
(milliseconds since the start), `journalctl -o short-monotonic` (seconds since boot), the logging HOWTO's
`%m/%d/%Y %I:%M:%S %p`; Julia's `[ Info: `, coloredlogs' host, name and pid; SkyPilot's `(head, rank=0, pid=..) `
and `(worker1, rank=1, pid=.., ip=..) `, GNU parallel's `--tag` (the swept value and a tab before each line); and
a `script` typescript (its header and footer lines, a pty's CRLF line ends).

Each function takes the eighth part's names and hands any other to `log_grammar_seventh` (the parts before render
as they did). The part was fixed before it was scored, scored once (72.70% recovered, 6.95% refused, 14.80% partial,
5.55% misread of 2,000 logs) and then tuned on: it is spent."""

from __future__ import annotations

import math

import log_grammar_fifth as fifth
import log_grammar_forms as forms
import log_grammar_seventh as seventh

# counter -> (kv, separator) as the trainer prints them
FORCED = {**seventh.FORCED, "wlm_batches": (" ", " | "), "flair_iter": (" ", " - "), "coqui_step": (": ", "\n     | > ")}
EPOCH_ONLY = {**seventh.EPOCH_ONLY, "sgd_epoch": 1, "flux_epoch": 1}
TABLES = ("matlab_table", "spacy_table")  # a header printed once, before the first row
HEADED = (*fifth.TABLES, *TABLES)
OWN_LINES = (*TABLES, "tfod_step", "sgd_epoch", "icefall_batch", "flux_epoch")  # records under their own names
COUNTERS = ("wlm_batches", "flair_iter", "coqui_step", *OWN_LINES)
NEW = (*seventh.NEW, *COUNTERS)  # the counters of the sixth, seventh and eighth parts (records built here)

DATES = ["relative_ms", "monotonic", "ampm"]
LOGGERS = ["julia_info", "coloredlogs"]
RANKS = ["skypilot_head", "skypilot_worker", "parallel_tag"]
DRESS = ["typescript"]
LOSS_NAMES = ["trn_loss", "tr_loss", "train_mse"]
CADENCES = ["15", "80", "400"]
EVALS = ["wlm_end_epoch", "flair_dev", "coqui_eval"]
BETWEEN = ["keras_early_stop", "sklearn_convergence", "matlab_gpu", "spacy_banner", "flair_epoch_done"]


def date(kind: str, t: int) -> str:
    h, m, s = 11 + t // 3600 % 12, t // 60 % 60, t % 60
    out = {"relative_ms": f"{t * 1000 + (t * 37) % 1000:6d} MainThread ",  # logging's relativeCreated: ms
           "monotonic": f"[{f'{4000 + t}.{(t * 104729) % 1_000_000:06d}':>12}] gpu-node1 python3[12345]: ",
           "ampm": f"07/24/2024 {(h - 1) % 12 + 1:02d}:{m:02d}:{s:02d} {'AM' if h < 12 else 'PM'} "}.get(kind)
    return seventh.date(kind, t) if out is None else out


def logger(kind: str) -> str:
    out = {"julia_info": "[ Info: ", "coloredlogs": "2024-07-24 11:20:33 gpu-node1 __main__[12345] INFO "}.get(kind)
    return seventh.logger(kind) if out is None else out


def rank(kind: str) -> str:
    out = {"skypilot_head": "(head, rank=0, pid=27079) ", "skypilot_worker": "(worker1, rank=1, pid=2769, ip=10.100.10.12) ",
           "parallel_tag": "3e-4\t"}.get(kind)
    return seventh.rank(kind) if out is None else out


def dress(kind: str, text: str) -> str:
    """The log as written: `script`'s typescript (a header line, the pty's CRLF line ends, a footer line)."""
    if kind != "typescript":
        return seventh.dress(kind, text)
    return ('Script started on 2024-07-24 11:20:31+00:00 [COMMAND="python train.py" TERM="xterm-256color" '
            'TTY="/dev/pts/0" COLUMNS="120" LINES="40"]\n' + text.replace("\n", "\r\n")
            + '\nScript done on 2024-07-24 13:02:11+00:00 [COMMAND_EXIT_CODE="0"]\n')


def table_header(kind: str) -> str:
    if kind == "matlab_table":
        rule = "|" + "=" * 88 + "|"
        return "\n".join([rule, "|  Epoch  |  Iteration  |  Time Elapsed  |  Mini-batch  |  Mini-batch  |  Base Learning  |",
                          "|         |             |   (hh:mm:ss)   |   Accuracy   |     Loss     |      Rate       |", rule])
    if kind == "spacy_table":
        return "E    #       LOSS TEXTCAT  CATS_SCORE  SCORE \n---  ------  ------------  ----------  ------"
    return fifth.table_header(kind)


def loss_text(kind: str, r: forms.Rand) -> str:
    """The train loss as this counter's trainer prints it."""
    if kind not in COUNTERS:
        return seventh.loss_text(kind, r)
    value = 2.0 + 3.0 * r.random()
    return {"wlm_batches": f"{value:5.2f}", "flair_iter": f"{value:.8f}", "coqui_step": repr(value),
            "matlab_table": f"{value:.4f}", "spacy_table": f"{value * 10:.2f}", "tfod_step": f"{value / 4:.8g}",
            "sgd_epoch": f"{value / 5:.6f}", "icefall_batch": f"{value / 10:.4g}", "flux_epoch": f"{value:.8g}"}[kind]


def _hms(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"


def record(kind: str, step: int, total: int, per_epoch: int, r: forms.Rand, fields: list[str], sep: str,
           loss: str, cadence: int) -> str:
    """A record of an eighth-part counter (or an earlier one): its head, then the loss and the other metrics."""
    if kind not in COUNTERS:
        return seventh.record(kind, step, total, per_epoch, r, fields, sep, loss, cadence)
    epoch, batch = 1 + step // per_epoch, step % per_epoch
    if kind == "wlm_batches":  # the batch within the epoch, of `len(train_data) // bptt`
        return (f"| epoch {epoch:3d} | {batch:5d}/{per_epoch:5d} batches | lr 20.00 | ms/batch {400 + r.random() * 99:5.2f} | "
                f"{sep.join(fields)} | ppl {math.exp(float(loss)):8.2f}")
    if kind == "flair_iter":  # `iter` counts the epoch's batches
        return f"epoch {epoch} - iter {batch}/{per_epoch} - {sep.join(fields)} - samples/sec: {60 + r.random() * 20:.2f} - lr: 0.100000"
    if kind == "coqui_step":  # STEP: the batch within the epoch; GLOBAL_STEP: the step
        t = step * 3
        head = (f"   --> TIME: 2024-07-24 {11 + t // 3600 % 12:02d}:{t // 60 % 60:02d}:{t % 60:02d} -- STEP: {batch}/{per_epoch}"
                f" -- GLOBAL_STEP: {step}")
        st = 0.9 + r.random() / 9
        rows = [f"{fields[0].split(': ', 1)[0]}: {loss}  ({float(loss) * 1.02 + 0.01!r})", *fields[1:], "current_lr: 5e-06 ",
                f"step_time: {st:.4f}  ({st * 1.01!r})", f"loader_time: {r.random() / 50:.4f}  ({r.random() / 40!r})"]
        return head + sep + sep.join(rows)
    if kind == "matlab_table":  # the step is the iteration; Time Elapsed is a clock
        return (f"|{epoch:>8} |{step:>12} |{_hms(step * 0.4 + 11):>15} |{f'{10 + r.random() * 80:.2f}%':>13} |{loss:>13} |"
                f"{'0.0100':>16} |")
    if kind == "spacy_table":  # E: the epoch from 0; #: the step
        cats = 50 + r.random() * 40
        return f"{step // per_epoch:>3}  {step:>6}  {loss:>12}  {cats:>10.2f}  {cats / 100:>6.2f}"
    if kind == "tfod_step":
        return _tfod(step, r, loss)
    if kind == "sgd_epoch":  # T: the samples seen (a sample count, never the step)
        return (f"-- Epoch {step}\nNorm: {1.5 + r.random():.2f}, NNZs: 4, Bias: {r.random() - 0.5:.6f}, T: {step * 1000}, "
                f"Avg. loss: {loss}\nTotal training time: {step * 0.01:.2f} seconds.")
    if kind == "icefall_batch":  # the batch within the epoch, then the global batch index: the step
        frames = 2800 + r.random() * 99
        return (f"Epoch {epoch}, batch {batch}, global_batch_idx: {step}, batch size: 56, loss[loss={loss}, "
                f"simple_loss={float(loss) * 1.9:.4g}, pruned_loss={float(loss) / 3:.4g}, over {frames:.2f} frames. ], "
                f"tot_loss[loss={float(loss) * 1.03:.4g}, simple_loss={float(loss) * 2:.4g}, pruned_loss={float(loss) / 2.9:.4g}, "
                f"over {frames * 190:.2f} frames. ], cur_lr: {4.5e-2 * (0.5 + r.random()):.2e}, grad_scale: 2.0")
    if kind == "flux_epoch":  # Flux's `@epochs` line, then a callback's `@show` of the loss (a Float32)
        return f"[ Info: Epoch {step}\nloss(x, y) = {loss}f0"
    raise KeyError(kind)


def _tfod(step: int, r: forms.Rand, loss: str) -> str:
    """The Object Detection API's model_lib_v2: the step line and the loss dict (pformat, one key a line), each
    logged twice (TensorFlow's logger and absl's)."""
    total = float(loss)
    cls, reg = total * (0.3 + r.random() / 5), total / 9
    parts = {"Loss/classification_loss": f"{cls:.8g}", "Loss/localization_loss": f"{total - cls - reg:.8g}",
             "Loss/regularization_loss": f"{reg:.8g}", "Loss/total_loss": loss, "learning_rate": f"{0.0319994 + r.random() / 1e4:.8g}"}
    body = "{" + ",\n ".join(f"'{k}': {v}" for k, v in parts.items()) + "}"
    t = step * 3
    absl = f"I0724 {11 + t // 3600 % 12:02d}:{t // 60 % 60:02d}:{t % 60:02d}.{t * 7919 % 1000000:06d} 140532679501696 model_lib_v2.py:"
    line = f"Step {step} per-step time {0.4 + r.random() / 5:.3f}s"
    return f"INFO:tensorflow:{line}\n{absl}705] {line}\nINFO:tensorflow:{body}\n{absl}708] {body}"


def eval_line(kind: str, step: int, value: str, kv: str) -> str:
    epoch, v = 1 + step // 1000, float(value)
    if kind == "wlm_end_epoch":
        rule = "-" * 89
        return f"{rule}\n| end of epoch {epoch:3d} | time: {140 + step % 9:5.2f}s | valid loss {v:5.2f} | valid ppl {math.exp(v):8.2f}\n{rule}"
    if kind == "flair_dev":
        return f"DEV : loss {v} - f1-score (micro avg)  {round(0.8 + step % 9 / 100, 4)}"
    if kind == "coqui_eval":
        return f"  --> EVAL PERFORMANCE\n     | > avg_loader_time: 0.0281 (+0.0000)\n     | > avg_loss: {v} (-0.00094)"
    return seventh.eval_line(kind, step, value, kv)


def between(kind: str, step: int, r: forms.Rand) -> str:
    if kind not in _BETWEEN:
        return seventh.between(kind, step, r)
    return _BETWEEN[kind](step, int(r.random() * 100))


_BETWEEN = {
    "keras_early_stop": lambda step, n: f"Epoch {2 + step // 1000}: early stopping",
    "sklearn_convergence": lambda step, n: (f"/usr/lib/python3/dist-packages/sklearn/neural_network/_multilayer_perceptron.py:"
                                            f"{686 + n % 9}: ConvergenceWarning: Stochastic Optimizer: Maximum iterations (200) "
                                            "reached and the optimization hasn't converged yet.\n  warnings.warn("),
    "matlab_gpu": lambda step, n: "Training on single GPU.\nInitializing input data normalization.",
    "spacy_banner": lambda step, n: ("ℹ Using CPU\n\n" + "=" * 27 + " Initializing pipeline " + "=" * 27 +
                                     "\n✔ Initialized pipeline\n\n" + "=" * 29 + " Training pipeline " + "=" * 29 +
                                     "\nℹ Pipeline: ['textcat']\nℹ Initial learn rate: 0.001"),
    "flair_epoch_done": lambda step, n: (f"{'-' * 100}\nEPOCH {1 + step // 1000} done: loss {2 + n / 40:.4f} - lr 0.1000000\n"
                                         "BAD EPOCHS (no improvement): 0"),
}


def extra(kind: str, r: forms.Rand, kv: str, step: int) -> tuple[str, bool] | None:
    """An eighth-part metric as printed (whether it is a step time), or an earlier part's, or None for the others."""
    if kind not in _EXTRAS:
        return seventh.extra(kind, r, kv, step)
    return _EXTRAS[kind](r, kv, 0.2 + r.random() * 0.3, step)


_EXTRAS = {
    "ms_per_batch": lambda r, kv, t, step: (f"ms/batch{kv}{t * 1000:5.2f}", True),  # word_language_model
    "per_step_time": lambda r, kv, t, step: (f"per-step time{kv}{t:.3f}s", True),  # the Object Detection API
    "bpc": lambda r, kv, t, step: (f"bpc{kv}{(2 + 3 * r.random()) / math.log(2):8.3f}", False),  # AWD-LSTM: bits a char
    "loader_time": lambda r, kv, t, step: (f"loader_time{kv}{r.random() / 50:.4f}", False),  # Coqui: a data wait
}
EXTRAS = list(_EXTRAS)
