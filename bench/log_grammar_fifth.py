"""The fifth held-out part's printed forms (`log_grammar`), from trainers and launchers the reader's code did
not name, written as they print: PaddleDetection (`ppdet.engine INFO: Epoch: [0] [  20/7329] learning_rate:
0.000100 loss: 4.2 ...`), PaddleNLP's logger, fastai's epoch table, Chainer's PrintReport table, SpeechBrain's
train logger (`epoch: 1, lr: 1.00e+00 - train loss: 2.34 - valid loss: 2.10, valid error: 1.00e-01`),
Levanter's tqdm bar with its postfix, torchtune's DiskLogger (`Step 100 | loss:2.3 lr:2e-05 `), DeepSpeed's
engine and throughput-timer lines, Lightning's validate table and checkpoint message, Accelerate's launch
defaults, Ray Train's worker prefix, SageMaker's MPI prefix, `kubectl logs --timestamps` and `aws logs tail`.

Each function takes the fifth part's names and hands any other to `log_grammar_forms` (the parts before
render as they did). The part was fixed before it was scored, scored once (85.35% recovered, 4.75% refused,
9.85% partial, 0.05% misread of 2,000 logs) and then tuned on: it is spent."""

from __future__ import annotations

import log_grammar_forms as forms

# Counters of the fifth part: within epochs; the epoch alone (its step is the epoch: nothing finer is
# printed); tables with a header line; with the fields' separators their trainer prints.
EPOCHAL = ("ppdet_epoch_iter",)
EPOCH_ONLY = {"sb_epoch": 1, "fastai_table": 0}  # counter -> the first epoch printed
TABLES = ("fastai_table", "chainer_table")
FORCED = {"ppdet_epoch_iter": (": ", " "), "torchtune_disk": (":", " "), "tqdm_postfix": ("=", ", "),
          "sb_epoch": (": ", " - ")}  # counter -> (kv, separator) as the trainer prints them
COUNTERS = ("ppdet_epoch_iter", "tqdm_postfix", "sb_epoch", "torchtune_disk", *TABLES)
AT_END = ("hf_train_runtime",)  # printed once, after the last record


def date(kind: str, t: int) -> str:
    h, m, s = 11 + t // 3600 % 12, t // 60 % 60, t % 60
    ms = (t * 37) % 1000
    out = {"rfc3339_nano": f"2024-07-24T{h:02d}:{m:02d}:{s:02d}.{ms:03d}{(t * 7) % 1000:03d}{(t * 13) % 1000:03d}Z ",
           "paddle_bracket": f"[2024/07/24 {h:02d}:{m:02d}:{s:02d}] ",
           "aws_tail": f"2024-07-24T{h:02d}:{m:02d}:{s:02d}.{ms:03d}000+00:00 algo-1-1721812345 "}.get(kind)
    return forms.date(kind, t) if out is None else out


def logger(kind: str) -> str:
    out = {"ppdet_engine": "ppdet.engine INFO: ", "paddlenlp_level": "[    INFO] - ",
           "nemo_bracket": "[NeMo I 2024-07-24 11:20:33 nemo_logging:349] "}.get(kind)
    return forms.logger(kind) if out is None else out


def rank(kind: str) -> str:
    out = {"ray_train_worker": "(RayTrainWorker pid=23817, ip=10.0.0.12) ",
           "sagemaker_mpi": "[1,mpirank:0,algo-1]<stdout>:"}.get(kind)
    return forms.rank(kind) if out is None else out


def counter(kind: str, step: int, total: int, per_epoch: int, r: forms.Rand) -> str:
    """The head of a record line of a fifth-part counter (tables: see `table_header` and `table_row`)."""
    if kind == "ppdet_epoch_iter":
        epoch, batch = step // per_epoch, step % per_epoch
        return f"Epoch: [{epoch}] [{batch:>{len(str(per_epoch))}}/{per_epoch}] learning_rate: {1e-4 * (0.5 + r.random()):.6f} "
    if kind == "tqdm_postfix":  # Levanter: the bar's count is the step; the postfix after the rate
        pct = 100 * step // total
        bar = ("█" * (pct // 10)).ljust(10)
        done, left = int(step * 0.41), int((total - step) * 0.41)
        return (f"train: {pct:>3}%|{bar}| {step}/{total} [{done // 60:02d}:{done % 60:02d}<{left // 60:02d}:"
                f"{left % 60:02d}, {2 + r.random():.2f}it/s, ")
    if kind == "sb_epoch":
        return f"epoch: {step}, lr: {1e-3 * (0.5 + r.random()):.2e} - "
    if kind == "torchtune_disk":
        return f"Step {step} | "
    raise KeyError(kind)


def table_header(kind: str) -> str:
    if kind == "fastai_table":
        return "epoch     train_loss  valid_loss  accuracy  time    "
    return ("epoch       iteration   main/loss   validation/main/loss  main/accuracy  validation/main/accuracy  "
            "elapsed_time")


def table_row(kind: str, step: int, per_epoch: int, loss: float, r: forms.Rand) -> tuple[str, str]:
    """A table's row and its train loss as printed."""
    valid = loss * (0.9 + 0.2 * r.random())
    if kind == "fastai_table":  # one row an epoch: the step is the epoch
        text = f"{loss:.6f}"
        secs = 10 + int(r.random() * 50)
        return f"{step:<10}{text:<12}{valid:<12.6f}{0.5 + r.random() / 3:<10.6f}{secs // 60:02d}:{secs % 60:02d}     ", text
    text = f"{loss:g}"  # Chainer's PrintReport: `{:<Ng}  ` a column
    epoch = 1 + step // per_epoch
    return (f"{epoch:<10g}  {step:<10g}  {loss:<10g}  {valid:<20g}  {0.5 + r.random() / 3:<13g}  "
            f"{0.5 + r.random() / 3:<24g}  {0.41 * step + r.random():<12g}  ", text)


def eval_line(kind: str, step: int, value: str, kv: str) -> str:
    if kind == "lightning_box":  # Lightning's trainer.validate table
        rule = "━" * 27
        return (f"┏{rule}┳{rule}┓\n┃{'Validate metric':^27}┃{'DataLoader 0':^27}┃\n┡{rule}╇{rule}┩\n"
                f"│{'val_loss':^27}│{value:^27}│\n└{'─' * 27}┴{'─' * 27}┘")
    if kind == "ckpt_reached":  # Lightning's ModelCheckpoint
        v = float(value)
        return (f"Epoch {step // 1000}, global step {step}: 'val_loss' reached {v:0.5f} (best {v:0.5f}), saving model to "
                f"'/ckpt/epoch={step // 1000}-step={step}.ckpt' as top 3")
    if kind == "sb_test":  # SpeechBrain's test stats
        return f"Epoch loaded: {step} - test loss: {float(value):.2f}, test CER: 5.12, test WER: 10.34"
    return forms.eval_line(kind, step, value, kv)


def between(kind: str, step: int, r: forms.Rand) -> str:
    if kind not in _BETWEEN:
        return forms.between(kind, step, r)
    n = int(r.random() * 100)
    return _BETWEEN[kind](step, n)


_BETWEEN = {
    "ds_step_report": lambda step, n: (f"[2024-07-24 11:20:{n % 60:02d},{n:03d}] [INFO] [logging.py:96:log_dist] [Rank 0] "
                                       f"step={step}, skipped={n % 3}, lr=[{1e-4 * (1 + n / 100):.6g}], mom=[(0.9, 0.999)]"),
    "ds_throughput": lambda step, n: (f"[2024-07-24 11:20:{n % 60:02d},{n:03d}] [INFO] [timer.py:260:stop] epoch=0/micro_step="
                                      f"{step * 4}/global_step={step}, RunningAvgSamplesPerSec={150 + n / 7:.6f}, "
                                      f"CurrSamplesPerSec={148 + n / 5:.6f}, MemAllocated=4.21GB, MaxMemAllocated=9.87GB"),
    "ds_timers": lambda step, n: (f"[2024-07-24 11:20:{n % 60:02d},{n:03d}] [INFO] [logging.py:96:log_dist] [Rank 0] time (ms) | "
                                  f"fwd_microstep: {120 + n / 3:.2f} | bwd_microstep: {250 + n / 3:.2f} | bwd_inner_microstep: "
                                  f"{240 + n / 3:.2f} | bwd_allreduce_microstep: {9 + n / 50:.2f} | step_microstep: {20 + n / 9:.2f}"),
    "accelerate_defaults": lambda step, n: ("The following values were not passed to `accelerate launch` and had defaults "
                                            "used instead:\n\t`--num_processes` was set to a value of `1`\n\t`--num_machines` "
                                            "was set to a value of `1`\n\t`--mixed_precision` was set to a value of `'no'`"),
    "lightning_params": lambda step, n: (f"{100 + n} M     Trainable params\n0         Non-trainable params\n{100 + n} M     "
                                         f"Total params\n{(100 + n) * 4.194:.3f}   Total estimated model params size (MB)"),
    "wandb_history": lambda step, n: ("wandb: Run history:\nwandb:   train/loss █▇▆▅▄▃▃▂▂▁\nwandb:     train/lr ▁▂▃▄▅▆▇███\n"
                                      f"wandb: 🚀 View run fluent-sun-{n} at: https://wandb.ai/team/proj/runs/3kx9q1{n:02d}"),
}


def train_runtime(steps: int, losses: list[float]) -> str:
    """The HF Trainer's summary after training (its train_loss is the mean of the run's, not a record's)."""
    return (f"{{'train_runtime': {steps * 0.41:.4f}, 'train_samples_per_second': 12.345, 'train_steps_per_second': "
            f"{1 / 0.41:.3f}, 'train_loss': {sum(losses) / len(losses) + 1e-7}, 'epoch': 3.0}}")


def extra(kind: str, r: forms.Rand, kv: str, step: int) -> tuple[str, bool] | None:
    """A fifth-part metric as printed (whether it is a step time), or None for the others."""
    if kind not in _EXTRAS:
        return None
    return _EXTRAS[kind](r, kv, 0.2 + r.random() * 0.3, step)


_EXTRAS = {
    "batch_cost_plain": lambda r, kv, t, step: (f"batch_cost{kv}{t:.4f}", True),  # PaddleDetection: s, no unit
    "data_cost": lambda r, kv, t, step: (f"data_cost{kv}{t / 40:.4f}", False),
    "ips_images": lambda r, kv, t, step: (f"ips{kv}{8 / t:.4f} images/s", False),
    "tokens_per_gpu": lambda r, kv, t, step: (f"tokens_per_second_per_gpu{kv}{1500 + r.random() * 50:.4f}", False),
    "peak_memory_active": lambda r, kv, t, step: (f"peak_memory_active{kv}{12 + r.random():.4f}", False),
    "epoch_float": lambda r, kv, t, step: (f"epoch{kv}{step / 997:.2f}", False),  # HF's fractional epoch
    "lr_list": lambda r, kv, t, step: (f"lr{kv}[{1e-4 * (0.5 + r.random()):.6g}]", False),  # DeepSpeed's per group
}
EXTRAS = list(_EXTRAS)
