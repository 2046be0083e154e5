"""The seventh held-out part's printed forms (`log_grammar`), from trainers, launchers and loggers whose printed
shapes the reader's code did not name, written as they print: CatBoost (`10:\tlearn: 0.6807203\ttest: 0.6812345\t
best: 0.6812345 (10)\ttotal: 57.4ms\tremaining: 5.73s`), XGBoost (`[10]\ttrain-logloss:0.61745\teval-logloss:
0.62391`), LightGBM (`[10]\ttraining's binary_logloss: 0.528426\tvalid_1's binary_logloss: 0.541937`), ParlAI's
train report (`time:41s total_exs:3200 total_steps:100 epochs:0.13` and a two-line table under it whose
`total_train_updates` is the step), DGL's examples (`Epoch 00003 | Time(s) 0.0043 | Loss 1.9459 | Accuracy 0.1540 |
ETputs(KTEPS) 2446.73`: one record an epoch, `nan` seconds for the first three), Flax's MNIST example (`epoch:  1,
train_loss: 0.2375, train_accuracy: 92.83, test_loss: 0.0561, test_accuracy: 98.19`), PyTorch-Ignite's quickstart
(`Epoch[1], Iter[100] Loss: 0.19`, the iteration counted over the run), AllenNLP's epoch metrics table (`Epoch 0/39`,
then `Training |  Validation` and one `name |  train  |  valid` line a metric), GluonTS's trainer (`Epoch[0] Evaluation
metric 'epoch_loss'=5.234567`); GitHub Actions' 7-digit timestamps, moreutils `ts '%.s'` (unix seconds before the
line), ParlAI's `HH:MM:SS | ` clock, structlog's `[info     ] `, AllenNLP's logger line, `kubectl logs --prefix`
(`[pod/trainer-worker-0/pytorch] `), pdsh's `worker-0: ` (DeepSpeed's multi-node runner); Docker's json-file log (every line a JSON object) and a UTF-8 byte order
mark (in the `ansi` dimension: how a line is dressed).

Each function takes the seventh part's names and hands any other to `log_grammar_sixth` (the parts before render
as they did). The part was fixed before it was scored, scored once (66.85% recovered, 7.30% refused, 20.00%
partial, 5.85% misread of 2,000 logs) and then tuned on: it is spent."""

from __future__ import annotations

import json
import math

import log_grammar_forms as forms
import log_grammar_sixth as sixth

# counter -> (kv, separator) as the trainer prints them
FORCED = {**sixth.FORCED, "catboost_iter": (": ", "\t"), "xgb_round": (":", "\t"), "lgb_iter": (": ", "\t"),
          "dgl_epoch": (" ", " | "), "flax_epoch": (": ", ", "), "ignite_iter": (": ", " "), "gluonts_epoch": ("=", " ")}
EPOCH_ONLY = {**sixth.EPOCH_ONLY, "dgl_epoch": 0, "flax_epoch": 1, "allennlp_epoch": 0, "gluonts_epoch": 0}
OWN_LINES = ("parlai_report", "allennlp_epoch")  # records printed whole, under their own names
COUNTERS = ("catboost_iter", "xgb_round", "lgb_iter", "dgl_epoch", "flax_epoch", "ignite_iter", "gluonts_epoch",
            *OWN_LINES)
NEW = (*sixth.COUNTERS, *COUNTERS)  # the counters of the sixth and seventh parts (records built here)

DATES = ["gha_iso7", "unix_float", "clock_pipe"]
LOGGERS = ["structlog", "allennlp_logger"]
RANKS = ["kubectl_prefix", "pdsh_host"]
DRESS = ["docker_json", "utf8_bom"]
LOSS_NAMES = ["learn", "train-logloss", "epoch_loss"]
CADENCES = ["12", "60", "150"]
EVALS = ["ignite_results", "gluonts_val", "flax_eval"]
BETWEEN = ["unsloth_banner", "catboost_lr", "xgb_warning", "lgb_warning", "dgl_dataset"]


def date(kind: str, t: int) -> str:
    h, m, s = 11 + t // 3600 % 12, t // 60 % 60, t % 60
    out = {"gha_iso7": f"2024-07-24T{h:02d}:{m:02d}:{s:02d}.{(t * 7919) % 10_000_000:07d}Z ",  # GitHub Actions
           "unix_float": f"{1721820000 + t}.{(t * 104729) % 1_000_000:06d} ",  # moreutils ts '%.s'
           "clock_pipe": f"{h:02d}:{m:02d}:{s:02d} | "}.get(kind)  # ParlAI
    return sixth.date(kind, t) if out is None else out


def logger(kind: str) -> str:
    out = {"structlog": "[info     ] ",
           "allennlp_logger": "2024-07-24 11:20:33,123 - INFO - allennlp.training.gradient_descent_trainer - "}.get(kind)
    return sixth.logger(kind) if out is None else out


def rank(kind: str) -> str:
    out = {"kubectl_prefix": "[pod/trainer-worker-0/pytorch] ", "pdsh_host": "worker-0: "}.get(kind)
    return sixth.rank(kind) if out is None else out


def dress(kind: str, text: str) -> str:
    """The log as written: Windows line ends, Docker's json-file lines, a UTF-8 byte order mark."""
    if kind == "crlf":
        return text.replace("\n", "\r\n")
    if kind == "utf8_bom":
        return "\ufeff" + text
    if kind == "docker_json":
        return "".join(json.dumps({"log": line + "\n", "stream": "stdout",
                                   "time": f"2024-07-24T11:{k // 60 % 60:02d}:{k % 60:02d}.{k * 7919 % 10**9:09d}Z"},
                                  separators=(",", ":")) + "\n" for k, line in enumerate(text.splitlines()))
    return text


def loss_text(kind: str, r: forms.Rand) -> str:
    """The train loss as this counter's trainer prints it."""
    if kind not in COUNTERS:
        return sixth.loss_text(kind, r)
    value = 2.0 + 3.0 * r.random()
    return {"catboost_iter": f"{value:.7f}", "xgb_round": f"{value:.5f}", "lgb_iter": f"{value:g}",
            "parlai_report": f"{value:.4g}", "flax_epoch": f"{value / 5:.4f}", "ignite_iter": f"{value:.2f}",
            "allennlp_epoch": f"{value:.3f}", "gluonts_epoch": f"{value:f}"}.get(kind, f"{value:.4f}")


def record(kind: str, step: int, total: int, per_epoch: int, r: forms.Rand, fields: list[str], sep: str,
           loss: str, cadence: int) -> str:
    """A record of a seventh-part counter (or a sixth-part one): its head, then the loss and the other metrics."""
    if kind not in COUNTERS:
        return sixth.record(kind, step, total, per_epoch, r, fields, sep, loss, cadence)
    if kind in EPOCH_ONLY:  # no second epoch figure beside the one the trainer prints
        fields = fields[:1] + [f for f in fields[1:] if not f.lower().startswith("epoch")]
    body = sep.join(fields)
    if kind == "catboost_iter":
        test = float(loss) + 0.01 + r.random() / 50
        return (f"{step}:\t{body}\ttest: {test:.7f}\tbest: {test:.7f} ({step})\ttotal: {57 + step * 0.9:.1f}ms\t"
                f"remaining: {(total - step) * 0.0009:.2f}s")
    if kind == "xgb_round":
        return f"[{step}]\t{body}\teval-logloss:{float(loss) + r.random() / 9:.5f}"
    if kind == "lgb_iter":
        return f"[{step}]\ttraining's {body}\tvalid_1's binary_logloss: {float(loss) + r.random() / 9:g}"
    if kind == "dgl_epoch":  # the step is the epoch; its mean time is nan until epoch 3
        secs = "nan" if step < 3 else f"{0.004 + r.random() / 1000:.4f}"
        kteps = "nan" if step < 3 else f"{2400 + r.random() * 99:.2f}"
        return f"Epoch {step:05d} | Time(s) {secs} | {body} | Accuracy {0.15 + r.random() / 2:.4f} | ETputs(KTEPS) {kteps}"
    if kind == "flax_epoch":
        return (f"epoch:{step:3d}, {body}, train_accuracy: {90 + r.random() * 9:.2f}, test_loss: {r.random() / 9:.4f}, "
                f"test_accuracy: {95 + r.random() * 4:.2f}")
    if kind == "ignite_iter":
        return f"Epoch[{1 + step // per_epoch}], Iter[{step}] {body}"
    if kind == "gluonts_epoch":
        name, _, value = fields[0].partition("=")
        return (f"Epoch[{step}] Learning rate is 0.001\nEpoch[{step}] Elapsed time {2 + r.random():.3f} seconds\n"
                f"Epoch[{step}] Evaluation metric '{name}'={value}")
    if kind == "parlai_report":
        return _parlai(step, per_epoch, r, loss)
    if kind == "allennlp_epoch":
        return _allennlp(step, total, r, loss)
    raise KeyError(kind)


def _parlai(step: int, per_epoch: int, r: forms.Rand, loss: str) -> str:
    """ParlAI's train log: `time:..s total_exs:.. total_steps:.. epochs:..`, then its report as a table."""
    cols = [("clip", "1"), ("ctpb", f"{1300 + int(r.random() * 99)}"), ("ctps", f"{17000 + int(r.random() * 999)}"),
            ("exps", f"{200 + r.random() * 9:.1f}"), ("exs", f"{32 * 50}"), ("gnorm", f"{13 + r.random():.4g}"),
            ("loss", loss), ("lr", "1e-05"), ("ltpb", f"{929 + r.random():.1f}"), ("ltps", f"{12000 + int(r.random() * 99)}"),
            ("ppl", f"{math.exp(float(loss)):.4g}"), ("token_acc", f".{3800 + int(r.random() * 99)}"),
            ("total_train_updates", f"{step}"), ("tpb", "2278"), ("tps", f"{29000 + int(r.random() * 999)}"),
            ("ups", f"{12 + r.random():.4g}")]
    widths = [max(len(k), len(v)) for k, v in cols]
    head = "  ".join(k.rjust(w) for (k, _), w in zip(cols, widths))
    row = "  ".join(v.rjust(w) for (_, v), w in zip(cols, widths))
    return (f"time:{int(step * 0.41)}s total_exs:{step * 32} total_steps:{step} epochs:{step / per_epoch:.2f}\n"
            f"    {head}\n    {row}")


def _allennlp(epoch: int, total: int, r: forms.Rand, loss: str) -> str:
    """AllenNLP's `Epoch N/M` and its metrics table (`%s |  %8.3f  |  %8.3f`), each line logged on its own."""
    at = "2024-07-24 11:20:33,123 - INFO - allennlp.training."
    names = {"accuracy": (f"{0.8 + r.random() / 9:8.3f}", f"{0.8 + r.random() / 9:8.3f}"),
             "gpu_0_memory_MB": (f"{1234 + r.random() * 99:8.3f}", f"{'N/A':>8}"),
             "loss": (f"{float(loss):8.3f}", f"{float(loss) + r.random() / 5:8.3f}"),
             "worker_0_memory_MB": (f"{3456 + r.random() * 99:8.3f}", f"{'N/A':>8}")}
    width = max(len(k) for k in names)
    lines = [f"{at}gradient_descent_trainer - Epoch {epoch}/{total - 1}",
             f"{at}callbacks.console_logger - {'Training'.rjust(width + 13)} |  {'Validation':<10}"]
    lines += [f"{at}callbacks.console_logger - {k.ljust(width)} |  {t}  |  {v}" for k, (t, v) in names.items()]
    return "\n".join(lines)


def eval_line(kind: str, step: int, value: str, kv: str) -> str:
    epoch = 1 + step // 1000
    if kind == "ignite_results":
        return f"Validation Results - Epoch[{epoch}] Avg accuracy: {0.9 + step % 7 / 100:.2f} Avg loss: {float(value):.2f}"
    if kind == "gluonts_val":
        return f"Epoch[{epoch}] Evaluation metric 'validation_epoch_loss'={float(value):f}"
    if kind == "flax_eval":  # Flax's ImageNet example
        return f"eval epoch: {epoch}, loss: {float(value):.4f}, accuracy: {70 + step % 9:.2f}"
    return sixth.eval_line(kind, step, value, kv)


def between(kind: str, step: int, r: forms.Rand) -> str:
    if kind not in _BETWEEN:
        return sixth.between(kind, step, r)
    return _BETWEEN[kind](step, int(r.random() * 100))


_BETWEEN = {
    "unsloth_banner": lambda step, n: ("==((====))==  Unsloth - 2x faster free finetuning | Num GPUs used = 1\n"
                                       "   \\\\   /|    Num examples = 51,760 | Num Epochs = 1 | Total steps = 60\n"
                                       "O^O/ \\_/ \\    Batch size per device = 2 | Gradient accumulation steps = 4\n"
                                       "\\        /    Data Parallel GPUs = 1 | Total batch size (2 x 4 x 1) = 8\n"
                                       ' "-____-"     Trainable parameters = 41,943,040/8,000,000,000 (0.52% trained)'),
    "catboost_lr": lambda step, n: f"Learning rate set to 0.{57693 + n:06d}",
    "xgb_warning": lambda step, n: (f"[11:20:{n % 60:02d}] WARNING: /workspace/src/learner.cc:740: \n"
                                    'Parameters: { "n_estimators" } are not used.\n'),
    "lgb_warning": lambda step, n: "[LightGBM] [Warning] No further splits with positive gain, best gain: -inf",
    "dgl_dataset": lambda step, n: ("  NumNodes: 2708\n  NumEdges: 10556\n  NumFeats: 1433\n  NumClasses: 7\n"
                                    "  NumTrainingSamples: 140\n  NumValidationSamples: 500\n  NumTestSamples: 1000"),
}


def extra(kind: str, r: forms.Rand, kv: str, step: int) -> tuple[str, bool] | None:
    """A seventh-part metric as printed (whether it is a step time), or an earlier part's, or None for the others."""
    if kind not in _EXTRAS:
        return sixth.extra(kind, r, kv, step)
    return _EXTRAS[kind](r, kv, 0.2 + r.random() * 0.3, step)


_EXTRAS = {
    "ups": lambda r, kv, t, step: (f"ups{kv}{1 / t:.4g}", True),  # ParlAI: updates a second
    "exps": lambda r, kv, t, step: (f"exps{kv}{32 / t:.1f}", False),  # ParlAI: examples a second
    "speed_samples_paren": lambda r, kv, t, step: (f"Speed (samples/sec){kv}{1024 / t:.4f}", False),  # DGL
    "catboost_total": lambda r, kv, t, step: (f"total{kv}{57 + step * t:.1f}ms", False),  # CatBoost: a clock
    "train_accuracy": lambda r, kv, t, step: (f"train_accuracy{kv}{90 + r.random() * 9:.2f}", False),  # Flax
}
EXTRAS = list(_EXTRAS)
