"""The thirteenth held-out part's printed forms (`log_grammar`), from trainers, launchers and tools whose printed shapes
the earlier parts did not hold, written as they print: fairseq2's LogMetricRecorder (`[Rank 0] 2026-11-28 03:04:05,123
INFO fairseq2.recipes.trainer - Train Metrics (step 100) - NLL Loss: 2.34567 | Gradient Norm: 0.5123 | .. | Wall Time:
1,234s | .. | Total Number of Examples: 1,600 | ..`, or behind rich's `[11/28/26 03:04:05] INFO     `), llama2.c's
train.py (`100 | loss 2.3456 | lr 5.000000e-04 | 123.45ms | mfu 12.34%`), nanochat's base_train (`step 00100/21400
(0.47%) | loss: 3.456789 | lrm: 1.00 | dt: 123.45ms | tok/sec: 1,234,567 | bf16_mfu: 45.67 | epoch: 1 | total time:
1.23m`), modded-nanogpt (`step:100/1770 train_loss:3.4567 train_time:12345ms step_avg:123.45ms`), tinygrad's examples
(`100  221.74 ms run,    2.22 ms python,  219.52 ms CL,    2.31 loss, 0.000807 LR, 4.66 GB used,   3042.49 GFLOPS`: the
value before its name), TFLearn's TermLogger (`--`, `Training Step: 860  | total loss: 0.29368 | time: 7.951s`, `| Adam |
epoch: 002 | loss: 0.29368 - acc: 0.9165 -- iter: 06400/55000`: the iter counts samples), skorch's PrintLog table
(`  epoch    train_loss    valid_acc    valid_loss     dur`: one row an epoch, best values coloured), scikit-learn's
MLP (`Iteration 3, loss = 0.41234567`, `Validation score: 0.912000`: one record an epoch) and gradient boosting's
VerboseReporter table (`      Iter       Train Loss   Remaining Time `) and ms-swift's dicts (`{'loss': 1.47077751,
.., 'epoch': 0.01, 'global_step/max_steps': '1/94', 'percentage': '1.06%', 'elapsed_time': '2s', ..}`); GNU `date` in
a Japanese locale, Twisted's `2026-11-28 03:04:05+0000 [-] ` and PowerShell's `Get-Date` stamps, Celery's worker logger
(a task's prints as `WARNING/ForkPoolWorker-1`), pino-pretty, `argo logs`' pod prefix and Metaflow's task prefix; logs
saved as an asciinema cast, fluent-bit's stdout output, a Go supervisor's logfmt (slog) lines, a knitted R Markdown
(`## ` before each output line) and a GitHub issue (the log in a fenced block); ms-swift's checkpoint line,
huggingface/tokenizers' fork warning, torch._dynamo's recompile warning (`[0/8]`), nanochat's CORE metric,
modded-nanogpt's peak memory and TFLearn's run header between the records.

Each function takes the thirteenth part's names and hands any other to `log_grammar_twelfth` (the parts before render as
they did). Scored once (session 11): 75.50% recovered, 9.40% refused, 8.65% partial, 6.45% misread of 2,000 logs; it
is spent (SPENT13)."""

from __future__ import annotations

import json
import re

import log_grammar_forms as forms
import log_grammar_twelfth as twelfth

FORCED = twelfth.FORCED
EPOCH_ONLY = {**twelfth.EPOCH_ONLY, "skorch_table": 1, "sklearn_mlp": 1}  # one record an epoch, from 1: the step is it
EPOCHAL = twelfth.EPOCHAL
TABLES = ("skorch_table", "sklearn_gb")
HEADED = (*twelfth.HEADED, *TABLES)
STEPLESS = twelfth.STEPLESS
COUNTERS = ("fairseq2_metrics", "llama2c_iter", "nanochat_step", "modded_step", "tinygrad_run", "tflearn_step",
            "skorch_table", "sklearn_mlp", "sklearn_gb", "swift_dict")  # records under their own names
FROM_ONE = (*twelfth.FROM_ONE, "fairseq2_metrics", "modded_step", "tflearn_step", "sklearn_gb", "swift_dict")
NEW = (*twelfth.NEW, *COUNTERS)  # the counters of the sixth .. thirteenth parts (records built here)

DATES = ["ja_date", "twisted_stamp", "ps_get_date"]
LOGGERS = ["celery_worker", "pino_pretty"]
RANKS = ["argo_pod", "metaflow_task"]
DRESS = ["asciinema_cast", "fluentbit_stdout", "logfmt_slog", "knitr_md", "github_issue"]
LOSS_NAMES = ["train_cost", "NLL Loss", "running_loss"]
CADENCES = ["18", "75", "600"]
EVALS = ["fairseq2_valid", "nanochat_bpb", "modded_val"]
BETWEEN = ["swift_ckpt", "tokenizers_fork", "dynamo_recompile", "nanochat_core", "modded_peak_mem", "tflearn_run"]

_DAYS = "月火水木金土日"
_DAY = 1_795_824_000  # 2026-11-28 00:00:00 UTC in unix seconds


def _hms(t: int) -> tuple[int, int, int]:
    return twelfth._hms(t)


def date(kind: str, t: int) -> str:
    h, m, s = _hms(t)
    if kind == "ja_date":  # `date` under LANG=ja_JP.UTF-8
        return f"2026年 11月 28日 {_DAYS[5]}曜日 {h:02d}:{m:02d}:{s:02d} UTC "
    if kind == "twisted_stamp":  # Twisted's log observer: the zone offset, then the system in brackets
        return f"2026-11-28 {h:02d}:{m:02d}:{s:02d}+0000 [-] "
    if kind == "ps_get_date":  # PowerShell's `Get-Date` in en-US: the long date, a 12-hour clock
        return f"Saturday, November 28, 2026 {(h - 1) % 12 + 1}:{m:02d}:{s:02d} {'AM' if h < 12 else 'PM'} "
    return twelfth.date(kind, t)


def logger(kind: str) -> str:
    out = {"celery_worker": "[2026-11-28 03:04:05,123: WARNING/ForkPoolWorker-1] ",  # a task's stdout, redirected
           "pino_pretty": "[03:04:05.123] INFO (4312): "}.get(kind)
    return twelfth.logger(kind) if out is None else out


def rank(kind: str, t: int = 0) -> str:
    if kind == "argo_pod":
        return "train-pipeline-x7k2p-trainer-2716239812: "
    if kind == "metaflow_task":
        h, m, s = _hms(t)
        return f"2026-11-28 {h:02d}:{m:02d}:{s:02d}.{t * 37 % 1000:03d} [1732/train/5 (pid 4312)] "
    return twelfth.rank(kind, t)


def table_header(kind: str) -> str:
    if kind == "skorch_table":
        return "  epoch    train_loss    valid_acc    valid_loss     dur\n-------  ------------  -----------  ------------  ------"
    if kind == "sklearn_gb":
        return ("%10s " + "%16s " * 2) % ("Iter", "Train Loss", "Remaining Time")
    return twelfth.table_header(kind)


def loss_text(kind: str, r: forms.Rand) -> str:
    """The train loss as this counter's trainer prints it."""
    if kind not in COUNTERS:
        return twelfth.loss_text(kind, r)
    value = 2.0 + 3.0 * r.random()
    return {"fairseq2_metrics": f"{value / 2:g}", "llama2c_iter": f"{value:.4f}", "nanochat_step": f"{value:.6f}",
            "modded_step": f"{value:.4f}", "tinygrad_run": f"{value:.2f}", "tflearn_step": f"{value / 4:.5f}",
            "skorch_table": f"{value / 4:.4f}", "sklearn_mlp": f"{value / 4:.8f}", "sklearn_gb": f"{value / 3:.4f}",
            "swift_dict": repr(round(value / 2, 8))}[kind]


_BEST: dict[str, float] = {}  # skorch's best values so far in the log being drawn (its epochs start at 1)


def _best(key: str, text: str, colour: str) -> str:
    if float(text) > _BEST[key]:
        return f"{text:>12}"
    _BEST[key] = float(text)
    return f"      \x1b[{colour}m{text}\x1b[0m"


def _swift_time(s: int) -> str:
    h, m = s // 3600, s // 60 % 60
    return f"{h}h {m}m {s % 60}s" if h else f"{m}m {s % 60}s" if m else f"{s}s"


def record(kind: str, step: int, total: int, per_epoch: int, r: forms.Rand, fields: list[str], sep: str,
           loss: str, cadence: int) -> str:
    """A record of a thirteenth-part counter (or an earlier one), as its trainer prints it."""
    if kind not in COUNTERS:
        return twelfth.record(kind, step, total, per_epoch, r, fields, sep, loss, cadence)
    t = 0.2 + r.random() * 0.3
    pace = 0.25 + per_epoch % 7 / 30  # the run's mean seconds a step: its clocks only go forward
    v = float(loss)
    lr = 6e-4 * (1 - step / total)
    if kind == "fairseq2_metrics":  # the file handler's format, or rich's console; values sorted by priority
        h, m, s = _hms(step * 3)
        head = (f"[Rank 0] {twelfth._py_time(step * 3)} INFO fairseq2.recipes.trainer - " if per_epoch % 2
                else f"[11/28/26 {h:02d}:{m:02d}:{s:02d}] INFO     fairseq2.recipes.trainer - ")
        return (f"{head}Train Metrics (step {step}) - NLL Loss: {loss} | Gradient Norm: {0.2 + r.random():g} | Data Epoch: "
                f"{(step - 1) // per_epoch + 1} | Elapsed Time: {int(t * cadence)}s | Wall Time: {int(step * pace) + 61:,}s | "
                f"Learning Rate: {lr / 100:g} | Batch Size: 16 | Elements per Batch: 4,096 | Elements per Second: "
                f"{int(4096 / t):,} | Number of Examples: 16 | Number of Elements: 4,096 | Total Number of Examples: "
                f"{16 * step:,} | Total Number of Elements: {4096 * step:,}")
    if kind == "llama2c_iter":  # MFU is -100% until five iterations have run
        mfu = -100.0 if step < 5 else 10 + 20 * r.random()
        return f"{step} | loss {loss} | lr {lr:e} | {t * 1000:.2f}ms | mfu {mfu:.2f}%"
    if kind == "nanochat_step":
        lrm = min(1.0, (total - step) / (0.2 * total))
        spent = step * pace / 60
        if per_epoch % 2:
            return (f"step {step:05d}/{total:05d} ({100 * step / total:.2f}%) | loss: {loss} | lrm: {lrm:.2f} | dt: "
                    f"{t * 1000:.2f}ms | tok/sec: {int(524288 / t):,} | bf16_mfu: {30 + 20 * r.random():.2f} | epoch: "
                    f"{step // per_epoch + 1} | total time: {spent:.2f}m | eta: {(total - step) * pace / 60:.1f}m")
        return (f"step {step:05d}/{total:05d} ({100 * step / total:.2f}%) | loss: {loss} | grad norm: {0.2 + r.random():.4f} | "
                f"lrm: {lrm:.2f} | dt: {t * 1000:.2f}ms | tok/sec: {int(524288 / t):,} | mfu: {30 + 20 * r.random():.2f} | "
                f"total time: {spent:.2f}m")
    if kind == "modded_step":  # the step after it is taken; the time the run has trained so far, and its mean
        return f"step:{step}/{total} train_loss:{loss} train_time:{int(step * pace * 1000)}ms step_avg:{pace * 1000:.2f}ms"
    if kind == "tinygrad_run":
        run, py = t * 1000, t * 1000 * (0.01 + r.random() / 50)
        device = "CUDA" if per_epoch % 2 else "METAL"
        return (f"{step:3d} {run:7.2f} ms run, {py:7.2f} ms python, {run - py:7.2f} ms {device}, {loss:>7} loss, "
                f"{lr * 10:.6f} LR, {4 + per_epoch % 7 / 3:.2f} GB used, {3000 / t / 10:9.2f} GFLOPS")
    if kind == "tflearn_step":  # the iter counts the samples of the epoch; the epoch's last record has its validation
        epoch, batch = (step - 1) // per_epoch + 1, (step - 1) % per_epoch + 1
        samples = 64 * per_epoch
        total_loss = f"\x1b[1m\x1b[32m{loss}\x1b[0m\x1b[0m" if per_epoch % 2 else loss
        val = f" | val_loss: {v * 0.95:.5f} - val_acc: {0.9 + r.random() / 20:.4f}" if batch == per_epoch else ""
        return (f"--\nTraining Step: {step}  | total loss: {total_loss} | time: {batch * pace:.3f}s\n| Adam | epoch: "
                f"{epoch:03d} | loss: {loss} - acc: {0.6 + r.random() / 3:.4f}{val} -- iter: "
                f"{str(64 * batch).zfill(len(str(samples)))}/{samples}")
    if kind == "skorch_table":  # tabulate's widths; a best value so far coloured (cyan the train loss, purple the valid)
        valid = f"{v * (0.9 + r.random() / 5):.4f}"
        if step == 1:
            _BEST.update(train=v, valid=float(valid))
        train = _best("train", loss, "36")
        valid = _best("valid", valid, "35")
        return f"{step:>7}  {train}  {0.5 + r.random() / 2:>11.4f}  {valid}  {t / 3:.4f}"
    if kind == "sklearn_mlp":
        score = f"\nValidation score: {0.8 + r.random() / 6:f}" if per_epoch % 2 else ""
        return f"Iteration {step}, loss = {loss}{score}"
    if kind == "sklearn_gb":
        left = (total - step) * pace / 10
        remaining = f"{left / 60:.2f}m" if left > 60 else f"{left:.2f}s"
        return f"{step:>10d} {loss:>16} {remaining:>16s}"
    if kind == "swift_dict":
        elapsed = int(step * pace)
        return (f"{{'loss': {loss}, 'grad_norm': {round(0.5 + 10 * r.random(), 8)!r}, 'learning_rate': {lr / 60:.4g}, "
                f"'token_acc': {round(0.5 + r.random() / 3, 8)!r}, 'epoch': {round(step / per_epoch / 3, 2)!r}, "
                f"'global_step/max_steps': '{step}/{total}', 'percentage': '{100 * step / total:.2f}%', 'elapsed_time': "
                f"'{_swift_time(elapsed)}', 'remaining_time': '{_swift_time(int((total - step) * pace))}', 'memory(GiB)': "
                f"{round(4 + per_epoch % 9 / 7, 2)!r}, 'train_speed(iter/s)': {round(1 / t, 6)!r}}}")
    raise KeyError(kind)


def eval_line(kind: str, step: int, value: str, kv: str, counter: str = "") -> str:
    v = float(value)
    if kind == "fairseq2_valid":
        return (f"Validation Metrics (step {step}) - NLL Loss: {v:g} | Data Epoch: 1 | Elapsed Time: 12s | Wall Time: "
                f"{step // 2 + 75:,}s | Number of Examples: 1,024 | Total Number of Examples: 1,024")
    if kind == "nanochat_bpb":
        return f"Step {step:05d} | Validation bpb: {v / 3:.4f}"
    if kind == "modded_val":
        return f"step:{step}/{max(1770, step)} val_loss:{v:.4f} train_time:{step * 312}ms step_avg:{312:.2f}ms"
    return twelfth.eval_line(kind, step, value, kv, counter)


def between(kind: str, step: int, r: forms.Rand, counter: str = "") -> str:
    """A line printed between the records (by another tool)."""
    if kind not in _BETWEEN:
        return twelfth.between(kind, step, r, counter)
    return _BETWEEN[kind](step, int(r.random() * 100))


def _dynamo(n: int) -> str:
    pre = f"W1128 03:04:{n % 60:02d}.{n * 7919 % 1_000_000:06d} 4312 torch/_dynamo/convert_frame.py:844] [0/8] "
    return "\n".join(pre + msg for msg in (
        "torch._dynamo hit config.cache_size_limit (8)", "   function: 'forward' (/workspace/model.py:112)",
        "   last reason: 0/0: L['self']._modules['attn'].training == True",
        'To log all recompilation reasons, use TORCH_LOGS="recompiles".',
        "To diagnose recompilation issues, see https://pytorch.org/docs/main/torch.compiler_troubleshooting.html."))


_BETWEEN = {
    "swift_ckpt": lambda step, n: f"[INFO:swift] Saving model checkpoint to /root/output/v0-20261128-030405/checkpoint-{step}",
    "tokenizers_fork": lambda step, n: ("huggingface/tokenizers: The current process just got forked, after parallelism has "
                                        "already been used. Disabling parallelism to avoid deadlocks...\nTo disable this "
                                        "warning, you can either:\n\t- Avoid using `tokenizers` before the fork if possible\n"
                                        "\t- Explicitly set the environment variable TOKENIZERS_PARALLELISM=(true | false)"),
    "dynamo_recompile": lambda step, n: _dynamo(n),
    "nanochat_core": lambda step, n: f"Step {step:05d} | CORE metric: {0.1 + n / 1000:.4f}",
    "modded_peak_mem": lambda step, n: f"peak memory allocated: {20000 + n * 37} MiB reserved: {22000 + n * 41} MiB",
    "tflearn_run": lambda step, n: ("---------------------------------\nRun id: SNAUPL\nLog directory: /tmp/tflearn_logs/\n"
                                    f"---------------------------------\nTraining samples: {55000 + n}\nValidation samples: 10000"),
}


def extra(kind: str, r: forms.Rand, kv: str, step: int) -> tuple[str, bool] | None:
    """A thirteenth-part metric as printed (whether it is a step time), or an earlier part's, or None for the others."""
    if kind not in _EXTRAS:
        return twelfth.extra(kind, r, kv, step)
    return _EXTRAS[kind](r, kv, 0.2 + r.random() * 0.3, step)


_EXTRAS = {
    "lrm": lambda r, kv, t, step: (f"lrm{kv}{1.0 - r.random() / 10:.2f}", False),  # the learning rate's multiplier (nanochat)
    "elements_per_sec": lambda r, kv, t, step: (f"Elements per Second{kv}{int(4096 / t):,}", False),  # fairseq2, commas
    "gb_used": lambda r, kv, t, step: (f"{4 + r.random():.2f} GB used", False),  # tinygrad: the value before its name
    "step_avg_ms": lambda r, kv, t, step: (f"step_avg{kv}{t * 1000:.2f}ms", False),  # the mean over the run so far
    "train_speed": lambda r, kv, t, step: (f"train_speed(iter/s){kv}{1 / t:.6f}", False),  # ms-swift
}
EXTRAS = list(_EXTRAS)

_SLOG_BARE = re.compile(r"[^\s=\"\\\x00-\x1f\x7f]+")
_ESC = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _go_quote(s: str) -> str:
    """Go's strconv.Quote, as slog's TextHandler writes a value that needs quoting."""
    out = []
    for c in s:
        if c in '"\\':
            out.append("\\" + c)
        elif c == "\t":
            out.append("\\t")
        elif c < " " or c == "\x7f":
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def _fluent(s: str) -> str:
    """A string as fluent-bit's stdout output prints a msgpack record: quotes and backslashes escaped, controls in hex."""
    return "".join("\\" + c if c in '"\\' else f"\\x{ord(c):02x}" if c < " " and c != "\t" else c for c in s)


def dress(kind: str, text: str) -> str:
    """The log as saved: an asciinema cast, fluent-bit's stdout output, a Go supervisor's slog lines, a knitted R Markdown
    document or a GitHub issue."""
    if kind not in DRESS:
        return twelfth.dress(kind, text)
    lines = text.split("\n")[:-1]
    if kind == "asciinema_cast":  # v2: a header, then output events; a pty's CRLF; reads split lines now and then
        head = {"version": 2, "width": 120, "height": 32, "timestamp": _DAY + 3 * 3600 + 245,
                "env": {"SHELL": "/bin/bash", "TERM": "xterm-256color"}}
        events, clock = [[0.412345, "o", "$ python train.py\r\n"]], 0.5
        for k, line in enumerate(lines):
            clock += 0.25 + k % 7 / 100
            data = line + "\r\n"
            cut = len(data) // 2 if k % 7 == 3 and len(data) > 8 else len(data)
            events.append([round(clock, 6), "o", data[:cut]])
            if cut < len(data):
                events.append([round(clock + 0.000731, 6), "o", data[cut:]])
        return "\n".join([json.dumps(head), *(json.dumps(e, ensure_ascii=False) for e in events)]) + "\n"
    if kind == "fluentbit_stdout":  # each flush numbers its records from 0
        out = []
        for k, line in enumerate(lines):
            stamp = f"{_DAY + 3 * 3600 + k}.{k * 7919 % 1_000_000_000:09d}"
            out.append(f'[{k % 5}] tail.0: [[{stamp}, {{}}], {{"log"=>"{_fluent(line)}", "stream"=>"stdout"}}]')
        return "\n".join(out) + "\n"
    if kind == "logfmt_slog":  # a supervisor that logs its child's lines: slog's TextHandler quotes what needs it
        out = []
        for k, line in enumerate(lines):
            msg = line if _SLOG_BARE.fullmatch(line) else _go_quote(line)
            out.append(f"time=2026-11-28T03:{4 + k // 60 % 50:02d}:{k % 60:02d}.{k * 37 % 1000:03d}Z level=INFO msg={msg} "
                       "stream=stdout pid=4312")
        return "\n".join(out) + "\n"
    if kind == "knitr_md":  # knitted to Markdown: the chunk's output in a fence, `## ` before each line
        head = ["---", 'title: "Training run"', "output: github_document", "---", "", "```r",
                'system("python train.py")', "```", "", "```"]
        return "\n".join([*head, *("## " + ln for ln in lines), "```"]) + "\n"
    head = ["### System Info", "", "- `transformers` version: 4.46.0", "- Platform: Linux-5.15.0-105-generic-x86_64-with-glibc2.35",
            "- Python version: 3.11.9", "- PyTorch version (GPU?): 2.5.1+cu124 (True)", "", "### Reproduction", "",
            "I start training with the config below and the loss stops going down. The full log:", "", "```"]
    tail = ["```", "", "### Expected behavior", "", "The loss keeps decreasing, as it does on a single GPU."]
    return "\n".join([*head, *(_ESC.sub("", ln) for ln in lines), *tail]) + "\n"  # copied from a terminal: no colours
