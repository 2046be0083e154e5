"""The sixth held-out part's printed forms (`log_grammar`), from trainers, launchers and loggers whose printed
shapes the reader's code did not name, written as they print: Marian (`Ep. 1 : Up. 1000 : Sen. 64,000 : Cost
4.23456789 : Time 12.34s : 12345.67 words/s : gNorm 0.5432 : L.r. 3.0000e-04`, its `[valid]` line), mlx-lm
(`Iter 10: Train loss 2.345, Learning Rate 1.000e-05, It/sec 0.512, ...`), MMCV's TextLoggerHook of MMDetection
2.x (`Epoch [1][50/1000]<TAB>lr: 2.000e-02, eta: ..., loss_cls: ..., loss: ...`), nanotron (`iteration: 10 / 100 |
consumed_tokens: 40.9K | ... | lm_loss: ...`, human-formatted numbers), OLMo (`[step=10/739328]` then one
`    name=value` line a metric), PyTorch Geometric's examples (`Epoch: 001, Loss: 0.6931, Train: 0.5000, Val:
0.4900, Test: 0.4800`: one record an epoch, its accuracies under bare split names), PaddleOCR (`epoch: [1/500], global_step: 10, lr: ..., loss: ...`),
"LLMs from scratch" (`Ep 1 (Step 000010): Train loss 3.456, Val loss 3.789`), Stable-Baselines3's table (a
record of `| name | value |` lines whose step is `total_timesteps`), nnU-Net v2's epoch log (one line a value,
negative dice losses), and the prefixes of `time.ctime()`, journald (`journalctl -o short-iso`), Hydra's
job logger, icefall's logger, nanotron's logger, Docker Compose, a host tag and MPICH's `mpiexec -l`; Windows line ends (in
the `ansi` dimension: how a line is dressed).

Each function takes the sixth part's names and hands any other to `log_grammar_fifth` (the parts before render
as they did). The part was fixed before it was scored, scored once (84.35% recovered, 5.40% refused, 10.05%
partial, 0.20% misread of 2,000 logs) and then tuned on: it is spent."""

from __future__ import annotations

import log_grammar_fifth as fifth
import log_grammar_forms as forms

# Counters: within epochs (the step is the epoch's batches before + the batch); the epoch alone; with the
# separators their trainer prints; records of several lines (the logger's prefix on the first line only).
EPOCHAL = ("mmcv_epoch",)
EPOCH_ONLY = {"nnunet_epoch": 0, "pyg_epoch": 1}  # counter -> the first epoch printed
FORCED = {"marian_up": (" ", " : "), "mlx_iter": (" ", ", "), "mmcv_epoch": (": ", ", "), "nanotron_iter": (": ", " | "),
          "olmo_step": ("=", "\n    "), "pyg_epoch": (": ", ", "), "paddleocr_step": (": ", ", "),
          "raschka_step": (" ", ", ")}  # counter -> (kv, separator) as the trainer prints them
OWN_LINES = ("sb3_table", "nnunet_epoch")  # records printed whole, under their own names
COUNTERS = (*FORCED, *OWN_LINES)
PER_ROLLOUT = "sb3_table"
OLMO_MAX = 739328  # OLMo-7B's max_steps, printed after every step  # its first record is after one rollout: the step is total_timesteps

DATES = ["bracket_iso_sec", "journal_iso", "ctime"]
LOGGERS = ["hydra", "icefall", "nanotron_bracket"]
RANKS = ["compose", "host_bracket", "mpich_label"]
LOSS_NAMES = ["Cost", "train/CrossEntropyLoss", "Train loss"]
CADENCES = ["8", "16", "300"]
EVALS = ["marian_valid", "mlx_val", "olmo_eval"]
BETWEEN = ["marian_seen", "marian_epoch", "mmcv_ckpt", "mlx_saved", "sb3_device", "future_warning"]


def date(kind: str, t: int) -> str:
    h, m, s = 11 + t // 3600 % 12, t // 60 % 60, t % 60
    out = {"bracket_iso_sec": f"[2024-07-24 {h:02d}:{m:02d}:{s:02d}] ",  # Marian
           "journal_iso": f"2024-07-24T{h:02d}:{m:02d}:{s:02d}+0000 gpu-node1 python3[12345]: ",
           "ctime": f"Wed Jul 24 {h:02d}:{m:02d}:{s:02d} 2024 "}.get(kind)
    return fifth.date(kind, t) if out is None else out


def logger(kind: str) -> str:
    out = {"hydra": "[2024-07-24 11:20:33,123][__main__][INFO] - ", "icefall": "INFO [train.py:1039] (0/4) ",
           "nanotron_bracket": "[INFO|DP=0|PP=0|TP=0|nid001]: "}.get(kind)
    return fifth.logger(kind) if out is None else out


def rank(kind: str) -> str:
    out = {"compose": "trainer-1  | ", "host_bracket": "[gpu-node1] ", "mpich_label": "[0] "}.get(kind)
    return fifth.rank(kind) if out is None else out


def human(x: float) -> str:
    """nanotron's human_format: 3 significant figures, a K/M/G suffix."""
    x, mag = float(f"{x:.3g}"), 0
    while abs(x) >= 1000:
        x, mag = x / 1000, mag + 1
    return f"{x:f}".rstrip("0").rstrip(".") + ["", "K", "M", "G"][mag]


def olmo_float(x: float) -> str:
    """OLMo's format_float."""
    if x > 1000:
        return f"{int(x):,d}"
    return f"{x:.1f}" if x > 100 else f"{x:.2f}" if x > 10 else f"{x:.3f}" if x > 1 else f"{x:.4f}"


def loss_text(kind: str, r: forms.Rand) -> str:
    """The train loss as this counter's trainer prints it."""
    value = 2.0 + 3.0 * r.random()
    return {"marian_up": f"{value:.8f}", "mlx_iter": f"{value:.3f}", "olmo_step": olmo_float(value),
            "pyg_epoch": f"{value / 5:.4f}", "raschka_step": f"{value:.3f}", "sb3_table": f"{value:.3g}",
            "nnunet_epoch": str(round(-value / 6, 4))}.get(kind, f"{value:.4f}")


def record(kind: str, step: int, total: int, per_epoch: int, r: forms.Rand, fields: list[str], sep: str,
           loss: str, cadence: int) -> str:
    """A record of a sixth-part counter: its head, then the loss and the other metrics (`fields`)."""
    epoch, batch = 1 + step // per_epoch, step % per_epoch
    body = sep.join(fields)
    if kind == "marian_up":
        return f"Ep. {epoch} : Up. {step} : Sen. {(batch + 1) * 64:,d} : {body} : L.r. {3e-4 * (0.5 + r.random()):.4e}"
    if kind == "mlx_iter":
        return f"Iter {step}: {sep.join([fields[0], f'Learning Rate {1e-5 * (0.5 + r.random()):.3e}', *fields[1:]])}"
    if kind == "mmcv_epoch":  # the loss parts before the loss, as MMDetection's detectors name them
        return (f"Epoch [{epoch}][{batch}/{per_epoch}]\tlr: {2e-2 * (0.5 + r.random()):.3e}, eta: {_eta(total - step)}, "
                f"time: {0.2 + r.random() * 0.3:.3f}, data_time: {r.random() / 20:.3f}, memory: {3000 + int(r.random() * 99)}, "
                f"loss_rpn_cls: {r.random() / 5:.4f}, loss_cls: {r.random() / 2:.4f}, acc: {90 + r.random() * 9:.4f}, "
                f"loss_bbox: {r.random() / 3:.4f}, {body}")
    if kind == "nanotron_iter":
        tps = 34000 + r.random() * 900
        return (f"iteration: {step} / {total} | consumed_tokens: {human(step * 4096.0)} | tokens_per_sec: {human(tps)} | "
                f"global_batch_size: 32 | {body} | model_tflops_per_gpu: {45 + r.random():.1f}")
    if kind == "olmo_step":
        return f"[step={step}/{OLMO_MAX}]\n    {body}\n    train/Perplexity={olmo_float(2.718281828 ** float(loss))}"
    if kind == "pyg_epoch":  # the step is the epoch
        return f"Epoch: {step:03d}, {body}, Train: {0.5 + r.random() / 3:.4f}, Val: {0.5 + r.random() / 3:.4f}, Test: {0.5 + r.random() / 3:.4f}"
    if kind == "paddleocr_step":
        return (f"epoch: [{epoch}/500], global_step: {step}, lr: {1e-3 * (0.5 + r.random()):.6f}, {body}, "
                f"avg_samples: 64.0, eta: {_eta(total - step)}")
    if kind == "raschka_step":
        return f"Ep {epoch} (Step {step:06d}): {body}, Val loss {2 + 3 * r.random():.3f}"
    if kind == "sb3_table":
        return _sb3(step, cadence, r, loss)
    if kind == "nnunet_epoch":
        return _nnunet(step, r, loss)
    raise KeyError(kind)


def _eta(steps_left: int) -> str:
    s = int(steps_left * 0.41)
    return (f"{s // 86400} day, " if s >= 86400 else "") + f"{s // 3600 % 24}:{s // 60 % 60:02d}:{s % 60:02d}"


def _sb3(step: int, per_rollout: int, r: forms.Rand, loss: str) -> str:
    """Stable-Baselines3's PPO table (`logger.dump(step=num_timesteps)`): the step is total_timesteps."""
    rollouts = step // per_rollout
    rows = [("rollout/", ""), ("ep_len_mean", f"{200 + int(r.random() * 50)}"), ("ep_rew_mean", f"{-1200 + r.random() * 99:.3g}"),
            ("time/", ""), ("fps", f"{1000 + int(r.random() * 99)}"), ("iterations", f"{rollouts}"),
            ("time_elapsed", f"{int(step * 0.002)}"), ("total_timesteps", f"{step}"), ("train/", ""),
            ("approx_kl", f"{r.random() / 50:.7f}"), ("clip_fraction", f"{r.random() / 5:.3g}"),
            ("entropy_loss", f"{-1.4 + r.random() / 9:.3g}"), ("learning_rate", "0.0003"), ("loss", loss),
            ("n_updates", f"{rollouts * 10}"), ("policy_gradient_loss", f"{-r.random() / 50:.3g}"),
            ("value_loss", f"{float(loss) * 2.1:.3g}")]
    lines = [f"| {k if k.endswith('/') else '    ' + k:<24} | {v:<15} |" for k, v in rows]
    return "\n".join(["-" * 46, *lines, "-" * 46])


def _nnunet(epoch: int, r: forms.Rand, loss: str) -> str:
    """nnU-Net v2's on_epoch_end: `{datetime.now()}: name value`, one line a value; its dice losses are negative."""
    def stamp(k: int) -> str:
        return f"2024-07-24 {11 + epoch // 20 % 12:02d}:{epoch * 3 % 60:02d}:{k * 7 % 60:02d}.{(epoch * 7919 + k) % 1000000:06d}: "
    val = f"{float(loss) - 0.05 - r.random() / 10:.4f}"
    dice = f"[{0.6 + r.random() / 3:.4f}, {0.5 + r.random() / 3:.4f}]"
    parts = ["", f"Epoch {epoch}", f"Current learning rate: {0.01 * (1 - epoch / 1000) ** 0.9:.5f}", f"train_loss {loss}",
             f"val_loss {val}", f"Pseudo dice {dice}", f"Epoch time: {120 + r.random() * 20:.2f} s"]
    return "\n".join(stamp(k) + p for k, p in enumerate(parts))


def eval_line(kind: str, step: int, value: str, kv: str) -> str:
    if kind == "marian_valid":
        return f"[valid] Ep. {1 + step // 1000} : Up. {step} : cross-entropy : {float(value):.5f} : new best"
    if kind == "mlx_val":
        return f"Iter {step}: Val loss {float(value):.3f}, Val took {4 + step % 7 / 3:.3f}s"
    if kind == "olmo_eval":
        return f"[step={step}/{OLMO_MAX}]\n    eval/c4_en-validation/CrossEntropyLoss={olmo_float(float(value))}"
    return fifth.eval_line(kind, step, value, kv)


def between(kind: str, step: int, r: forms.Rand) -> str:
    if kind not in _BETWEEN:
        return fifth.between(kind, step, r)
    n = int(r.random() * 100)
    return _BETWEEN[kind](step, n)


_BETWEEN = {
    "marian_seen": lambda step, n: f"[2024-07-24 11:20:{n % 60:02d}] Seen {(step + n) * 6400:,d} samples",
    "marian_epoch": lambda step, n: f"[2024-07-24 11:20:{n % 60:02d}] Starting epoch {2 + step // 1000}",
    "mmcv_ckpt": lambda step, n: f"Saving checkpoint at {1 + step // 1000} epochs",
    "mlx_saved": lambda step, n: (f"Iter {step}: Saved adapter weights to adapters/adapters.safetensors and "
                                  f"adapters/{step:07d}_adapters.safetensors."),
    "sb3_device": lambda step, n: "Using cuda device\nWrapping the env with a `Monitor` wrapper",
    "future_warning": lambda step, n: (f"/usr/lib/python3.10/site-packages/torch/cuda/amp/grad_scaler.py:{100 + n}: "
                                       "FutureWarning: `torch.cuda.amp.GradScaler(args...)` is deprecated. Please use "
                                       "`torch.amp.GradScaler('cuda', args...)` instead.\n  warnings.warn("),
}


def extra(kind: str, r: forms.Rand, kv: str, step: int) -> tuple[str, bool] | None:
    """A sixth-part metric as printed (whether it is a step time), or a fifth-part one, or None for the others."""
    if kind not in _EXTRAS:
        return fifth.extra(kind, r, kv, step)
    return _EXTRAS[kind](r, kv, 0.2 + r.random() * 0.3, step)


_EXTRAS = {
    "elapsed_ms_human": lambda r, kv, t, step: (f"elapsed_time_per_iteration_ms{kv}{human(t * 1000)}", True),  # nanotron
    "tokens_human": lambda r, kv, t, step: (f"tokens_per_sec_per_gpu{kv}{human(4096 * 8 / t)}", False),
    "it_sec": lambda r, kv, t, step: (f"It/sec{kv}{1 / t:.3f}", True),  # mlx-lm: iterations a second
    "peak_mem_gb": lambda r, kv, t, step: (f"Peak mem{kv}{5 + r.random():.3f} GB", False),
    "words_s": lambda r, kv, t, step: (f"Time{kv}{t * 100:.2f}s : {12000 + r.random() * 999:.2f} words/s", False),  # Marian
    "total_tokens_commas": lambda r, kv, t, step: (f"throughput/total_tokens{kv}{(step + 1) * 4_194_304:,d}", False),  # OLMo
}
EXTRAS = list(_EXTRAS)
