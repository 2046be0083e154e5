"""The eleventh held-out part's printed forms (`log_grammar`), from trainers, launchers and tools whose printed shapes
the earlier parts did not hold, written as they print: MindSpore's LossMonitor (`epoch: 2 step: 17, loss is
2.3025851249694824`: the step within the epoch), PaddleNLP's examples (`global step 40, epoch: 2, batch: 9, loss:
0.69315, speed: 4.75 step/s`), Megatron-DeepSpeed (` iteration      100/  143051 | consumed samples: 51200 | consumed
tokens: .. | elapsed time per iteration (ms): .. | learning rate: 1.500E-04 | global batch size: 512 | lm loss:
7.912345E+00 | .. | samples per second: .. | tokens per gpu per second (tgs): .. | TFLOPs: .. |`), the HF Trainer's
console as Axolotl and LLaMA-Factory leave it (tqdm's `\\r` bar, then `{'loss': 2.3456, 'grad_norm': .., 'learning_rate':
.., 'epoch': 0.12}`: the step is the bar's count), Lasagne's MNIST example (`Epoch 3 of 500 took 12.345s`, then
`  training loss:\\t\\t0.612345`: one record an epoch), CNTK's ProgressPrinter (` Minibatch[  11-  20]: loss = 0.612345
* 640, metric = 18.2% * 640;`), pycls' `json_stats: {"_type": "train_iter", "epoch": "2/100", .., "iter": "20/5005",
"loss": ..}` (the iteration within the epoch), Trax's loop (`Step    500: Ran 499 train steps in 5.77 secs`, then
`Step    500: train WeightedCategoryCrossEntropy |  1.33800304`), Composer's ConsoleLogger (`[batch=16/1000]:` or
`[epoch=2][batch=16/938]:`, then `\\t Train time/batch: 15` .. `\\t Train loss/train/total: 0.3591`) and PaddleClas
(`[Train][Epoch 2/120][Iter: 20/5005]lr(CosineAnnealingDecay): .., CELoss: .., loss: .., batch_cost: ..s, reader_cost:
.., ips: .. samples/s, eta: 11 days, 1:03:26`); dotted dates (`2026.11.28`), logcat's threadtime (pids and tids),
java.util.logging's two-line records, spdlog, zap's tab-separated console, Lightning's `[rank: 0] ` and Docker Swarm's
`trainer.1.x5kqj9fz8l3m@gpu-node-1    | ` prefixes; logs saved as an Azure Pipelines log, a `tmux capture-pane`
(lines hard-wrapped at the pane's width), a PowerShell transcript, a Kaggle notebook's JSON log, an LSF job report
and a CloudWatch Logs Insights CSV export; MindSpore's TimeMonitor, pycls' epoch json, CNTK's `Finished Epoch`,
Megatron's memory report, Lightning's seed line and a full-width-colon epoch summary between the records.

Each function takes the eleventh part's names and hands any other to `log_grammar_tenth` (the parts before render as
they did). Scored once: 78.05% recovered, 3.30% refused, 10.55% partial, 8.10% misread (162 of 2,000 logs); then open
to tuning: it is spent (SPENT11)."""

from __future__ import annotations

import csv
import io
import json
import math
import re
import struct
from datetime import timedelta

import log_grammar_forms as forms
import log_grammar_tenth as tenth

FORCED = tenth.FORCED
EPOCH_ONLY = {**tenth.EPOCH_ONLY, "lasagne_epoch": 1}  # one record an epoch, from epoch 1: the step is the epoch
EPOCHAL = tenth.EPOCHAL
HEADED = tenth.HEADED
COUNTERS = ("mindspore_loss", "paddlenlp_global", "megatron_ds_iter", "hf_bar_dict", "lasagne_epoch", "cntk_minibatch",
            "pycls_json", "trax_step", "composer_console", "paddleclas_iter")  # records under their own names
FROM_ONE = ("mindspore_loss", "paddlenlp_global", "megatron_ds_iter", "hf_bar_dict", "cntk_minibatch", "pycls_json",
            "trax_step", "composer_console")  # counted after the step is taken: never 0 (a log from 0 starts at one cadence)
# A pane shows what the carriage returns left: the HF bar's redraws are overwritten, only the dicts stay (no step printed:
# the records may be numbered in file order, as a sample counter's are)
STEPLESS = {("hf_bar_dict", "tmux_capture")}
NEW = (*tenth.NEW, *COUNTERS)  # the counters of the sixth .. eleventh parts (records built here)

DATES = ["dotted_ymd", "logcat", "jul_two_line"]
LOGGERS = ["spdlog", "zap_console"]
RANKS = ["lightning_rank", "swarm_task"]
DRESS = ["azure_pipelines", "tmux_capture", "ps_transcript", "kaggle_log", "lsf_report", "cloudwatch_csv"]
LOSS_NAMES = ["loss_value", "ce_loss", "Loss(train)"]
CADENCES = ["11", "32", "640"]
EVALS = ["trax_eval", "composer_eval", "megatron_valid"]
BETWEEN = ["mindspore_time", "pycls_epoch_json", "cntk_epoch", "megatron_mem", "lightning_seed", "cjk_epoch_summary"]


def _hms(t: int) -> tuple[int, int, int]:
    return 3 + t // 3600 % 20, t // 60 % 60, t % 60


def date(kind: str, t: int) -> str:
    h, m, s = _hms(t)
    ms = t * 37 % 1000
    out = {"dotted_ymd": f"2026.11.28 {h:02d}:{m:02d}:{s:02d} ",
           "logcat": f"11-28 {h:02d}:{m:02d}:{s:02d}.{ms:03d}  4312  4377 I python  : ",
           "jul_two_line": (f"Nov 28, 2026 {(h - 1) % 12 + 1}:{m:02d}:{s:02d} {'AM' if h < 12 else 'PM'} ai.trainer.Train run"
                            "\nINFO: ")}.get(kind)
    return tenth.date(kind, t) if out is None else out


def logger(kind: str) -> str:
    out = {"spdlog": "[2026-11-28 03:04:05.123] [trainer] [info] ",
           "zap_console": "2026-11-28T03:04:05.123Z\tINFO\ttrain/loop.go:88\t"}.get(kind)
    return tenth.logger(kind) if out is None else out


def rank(kind: str, t: int = 0) -> str:
    out = {"lightning_rank": "[rank: 0] ", "swarm_task": "trainer.1.x5kqj9fz8l3m@gpu-node-1    | "}.get(kind)
    return tenth.rank(kind, t) if out is None else out


def table_header(kind: str) -> str:
    return tenth.table_header(kind)


def _f32(x: float) -> str:
    """A float32 loss as Python prints it after `float(np.mean(..))` (MindSpore)."""
    return repr(struct.unpack("f", struct.pack("f", x))[0])


def loss_text(kind: str, r: forms.Rand) -> str:
    """The train loss as this counter's trainer prints it."""
    if kind not in COUNTERS:
        return tenth.loss_text(kind, r)
    value = 2.0 + 3.0 * r.random()
    return {"mindspore_loss": _f32(value / 2), "paddlenlp_global": f"{value / 2:.5f}", "megatron_ds_iter": f"{value * 2:.6E}",
            "hf_bar_dict": repr(round(value / 2, 4)), "lasagne_epoch": f"{value / 3:.6f}", "cntk_minibatch": f"{value / 2:.6f}",
            "pycls_json": f"{value * 2:.5f}", "trax_step": f"{value / 2:.8f}", "composer_console": f"{value / 2:.4f}",
            "paddleclas_iter": f"{value * 2:.5f}"}[kind]


def _bar(n: int, total: int, t: float) -> str:
    """tqdm's default bar (no ncols: 10 cells), as the HF Trainer's progress callback draws it."""
    frac = 10 * n / total
    full, part = int(frac), int((frac - int(frac)) * 8)
    cells = ("█" * full + ("▏▎▍▌▋▊▉"[part - 1] if part and full < 10 else "")).ljust(10)
    spent, left = tenth._interval(int(n * t)), tenth._interval(int((total - n) * t))
    return f"{100 * n / total:3.0f}%|{cells}| {n}/{total} [{spent}<{left}, {1 / t:5.2f}it/s]"


def _in_epoch(step: int, per_epoch: int) -> tuple[int, int]:
    """The epoch and the batch within it, both from 1, of a step counted from 1."""
    return (step - 1) // per_epoch + 1, (step - 1) % per_epoch + 1


def record(kind: str, step: int, total: int, per_epoch: int, r: forms.Rand, fields: list[str], sep: str,
           loss: str, cadence: int) -> str:
    """A record of an eleventh-part counter (or an earlier one), as its trainer prints it."""
    if kind not in COUNTERS:
        return tenth.record(kind, step, total, per_epoch, r, fields, sep, loss, cadence)
    t = 0.2 + r.random() * 0.3
    v = float(loss)
    if kind == "mindspore_loss":  # the step within the epoch, from 1; no epoch size is printed: every log crosses an epoch
        epoch, batch = _in_epoch(step, max(2 * cadence + per_epoch % cadence, 3))
        return f"epoch: {epoch} step: {batch}, loss is {loss}"
    if kind == "paddlenlp_global":
        epoch, batch = _in_epoch(step, per_epoch)
        acc = f", accu: {0.5 + r.random() / 2:.5f}" if per_epoch % 2 else ""
        return f"global step {step}, epoch: {epoch}, batch: {batch}, loss: {loss}{acc}, speed: {1 / t:.2f} step/s"
    if kind == "megatron_ds_iter":  # consumed samples and tokens, samples per second: not the step
        gbs, seq = 64 * (1 + per_epoch % 8), 2048
        return (f" iteration {step:8d}/{total:8d} | consumed samples: {step * gbs:12d} | consumed tokens: {step * gbs * seq:12d} | "
                f"elapsed time per iteration (ms): {t * 1000 * 9:.1f} | learning rate: {1.5e-4 * min(1.0, step / 2000):.3E} | "
                f"global batch size: {gbs:5d} | lm loss: {loss} | loss scale: {2.0 ** (12 + step % 3):.1f} | grad norm: "
                f"{0.5 + r.random():.3f} | num zeros: 0.0 | actual seqlen: {seq:5d} | number of skipped iterations: {0:3d} | "
                f"number of nan iterations: {0:3d} | samples per second: {gbs / t / 9:.3f} | tokens per gpu per second (tgs): "
                f"{gbs * seq / t / 9 / 8:.3f} | TFLOPs: {100 + 50 * r.random():.2f} |")
    if kind == "hf_bar_dict":  # the bar's redraws, cleared, then the logs dict (no step in it: the bar's count is the step)
        bars = [_bar(n, total, t) for n in sorted({max(step - cadence, 0), max(step - 1, 0), step})]
        logs = {"loss": v, **({"grad_norm": 0.3 + r.random()} if per_epoch % 2 == 0 else {}),
                "learning_rate": 5e-5 * (1 - step / total), "epoch": round(step / per_epoch, 2)}
        return "\r" + "\r".join(bars) + "\r" + " " * 80 + "\r" + str(logs)
    if kind == "lasagne_epoch":
        return (f"Epoch {step} of {total // 2} took {t * per_epoch:.3f}s\n  training loss:\t\t{loss}\n  validation loss:\t\t"
                f"{v * 1.08:.6f}\n  validation accuracy:\t\t{80 + 19 * r.random():.2f} %")
    if kind == "cntk_minibatch":  # updates since the start: the range's end is the step; `* 640`: samples
        mb = 32 * (1 + per_epoch % 4)
        n = min(cadence, step)
        metric = f", metric = {10 + 20 * r.random():.1f}% * {n * mb}" if per_epoch % 3 else ""
        return f" Minibatch[{step - n + 1:4d}-{step:4d}]: loss = {loss} * {n * mb}{metric};"
    if kind == "pycls_json":  # keys sorted; the epoch and the iteration within it as strings
        epoch, it = _in_epoch(step, per_epoch)
        stats = {"_type": "train_iter", "epoch": f"{epoch}/{total // per_epoch + 1}",
                 "eta": str(timedelta(seconds=int((total - step) * t))),
                 "iter": f"{it}/{per_epoch}", "loss": "LOSS", "lr": "LR", "mem": 6013 + per_epoch % 100,
                 "time_avg": "TAVG", "time_diff": "TDIFF", "top1_err": "TOP1", "top5_err": "TOP5"}
        text = json.dumps(stats)
        for key, value in (("LOSS", loss), ("LR", f"{0.1 * 0.5 * (1 + math.cos(math.pi * step / total)):.5f}"),
                           ("TAVG", f"{t * 1.02:.5f}"), ("TDIFF", f"{t:.5f}"), ("TOP1", f"{60 + 39 * r.random():.5f}"),
                           ("TOP5", f"{30 + 39 * r.random():.5f}")):
            text = text.replace(f'"{key}"', value)
        return f"[meters.py: 147]: json_stats: {text}"
    if kind == "trax_step":  # `Ran N train steps`: the steps since the last report
        ran = min(cadence, step) if step > 1 else 1
        return (f"Step {step:6d}: Ran {ran} train steps in {t * ran:.2f} secs\n"
                f"Step {step:6d}: {'train':<5} {'WeightedCategoryCrossEntropy':>28} | {v:11.8f}")
    if kind == "composer_console":  # the header's batch is counted after it; time/batch before it
        bs = 8 * (1 + per_epoch % 4)
        epoch, batch = _in_epoch(step, per_epoch)
        head = f"[epoch={epoch}][batch={batch}/{per_epoch}]:" if per_epoch % 2 else f"[batch={step}/{total}]:"
        metrics = [("time/epoch", epoch - 1), ("time/batch", step - 1), ("time/sample", (step - 1) * bs),
                   ("time/batch_in_epoch", batch - 1), ("time/sample_in_epoch", (batch - 1) * bs),
                   ("time/token", (step - 1) * bs * 1024), ("time/token_in_epoch", (batch - 1) * bs * 1024),
                   ("trainer/device_train_microbatch_size", bs), ("loss/train/total", loss),
                   ("metrics/train/LanguageCrossEntropy", f"{v:.4f}"), ("lr-DecoupledAdamW/group0", f"{6e-4 * (1 - step / total):.4e}")]
        return head + "".join(f"\n\t Train {name}: {value}" for name, value in metrics)
    if kind == "paddleclas_iter":  # the epoch from 1, the iteration within it from 0
        epoch, it = step // per_epoch + 1, step % per_epoch
        eta = str(timedelta(seconds=int((total - step) * t * 300)))
        return (f"[Train][Epoch {epoch}/{total // per_epoch + 1}][Iter: {it}/{per_epoch}]lr(CosineAnnealingDecay): "
                f"{0.1 * (1 - step / total):.8f}, "
                f"CELoss: {v:.5f}, loss: {loss}, batch_cost: {t:.5f}s, reader_cost: {t / 30:.5f}, ips: {256 / t:.5f} "
                f"samples/s, eta: {eta}")
    raise KeyError(kind)


def eval_line(kind: str, step: int, value: str, kv: str, counter: str = "") -> str:
    v = float(value)
    if kind == "trax_eval":
        return (f"Step {step:6d}: {'eval':<5} {'WeightedCategoryCrossEntropy':>28} | {v:11.8f}\n"
                f"Step {step:6d}: {'eval':<5} {'WeightedCategoryAccuracy':>28} | {0.5 + step % 41 / 100:11.8f}")
    if kind == "composer_eval":
        n = 11 + step % 5
        return (f"[Eval batch={n}/{n}] Eval on eval data:\n\t Eval metrics/eval/LanguageCrossEntropy: {v:.4f}\n"
                f"\t Eval metrics/eval/LanguagePerplexity: {math.exp(v):.4f}")
    if kind == "megatron_valid":
        line = f" validation loss at iteration {step} | lm loss value: {v:.6E} | lm loss PPL: {math.exp(v):.6E} | "
        return f"{'-' * (len(line) + 1)}\n{line}\n{'-' * (len(line) + 1)}"
    return tenth.eval_line(kind, step, value, kv, counter)


def between(kind: str, step: int, r: forms.Rand, counter: str = "") -> str:
    """A line printed between the records (by another tool). Where the epoch is only in a header (MONAI), a line that
    names another epoch prints blank, as the tenth part's do."""
    if kind not in _BETWEEN:
        return tenth.between(kind, step, r, counter)
    line = _BETWEEN[kind](step, int(r.random() * 100))
    return "" if counter == "monai_batch" and kind in _EPOCHS else line


_EPOCHS = ("pycls_epoch_json", "cntk_epoch", "cjk_epoch_summary")  # lines that name an epoch
_BETWEEN = {
    "mindspore_time": lambda step, n: f"epoch time: {5000 + n * 37.123:5.3f} ms, per step time: {3 + n / 97:5.3f} ms",
    "pycls_epoch_json": lambda step, n: (
        f'[meters.py: 190]: json_stats: {{"_type": "train_epoch", "epoch": "{1 + step // 1000}/100", "loss": {4 + n / 40:.5f}, '
        f'"lr": {0.1 - n / 2000:.5f}, "mem": {6000 + n}, "time_avg": {0.4 + n / 1000:.5f}, "time_epoch": {2000 + n * 3.1:.5f}, '
        f'"top1_err": {60 + n / 4:.5f}, "top5_err": {30 + n / 5:.5f}}}'),
    "cntk_epoch": lambda step, n: (f"Finished Epoch[{1 + step // 1000} of 100]: [Training] loss = {1 + n / 50:.6f} * 50000, "
                                   f"metric = {20 + n / 5:.1f}% * 50000 {17 + n / 9:.3f}s ({2800 + n * 3.3:5.1f} samples per second);"),
    "megatron_mem": lambda step, n: (f"[Rank 0] (after {step} iterations) memory (MB) | allocated: "
                                     f"{(12_614_000_128 + n * 1_234_567) / 2 ** 20} | max allocated: "
                                     f"{(20_971_520_000 + n * 7_340_033) / 2 ** 20} | reserved: 24576.0 | max reserved: 24576.0"),
    "lightning_seed": lambda step, n: f"[rank: 0] Seed set to {n}",
    "cjk_epoch_summary": lambda step, n: (f"第 {1 + step // 1000} 轮训练结束，平均损失：{3 + n / 50:.4f}，"
                                          f"用时：{100 + n * 1.7:.1f} 秒"),  # full-width colons and commas
}


def extra(kind: str, r: forms.Rand, kv: str, step: int) -> tuple[str, bool] | None:
    """An eleventh-part metric as printed (whether it is a step time), or an earlier part's, or None for the others."""
    if kind not in _EXTRAS:
        return tenth.extra(kind, r, kv, step)
    return _EXTRAS[kind](r, kv, 0.2 + r.random() * 0.3, step)


_EXTRAS = {
    "tgs": lambda r, kv, t, step: (f"tokens per gpu per second (tgs){kv}{2048 * 8 / t:.3f}", False),
    "speed_step_s": lambda r, kv, t, step: (f"speed{kv}{1 / t:.2f} step/s", True),  # the step time's inverse
    "params_norm": lambda r, kv, t, step: (f"params norm{kv}{240 + step / 1000 + r.random():.3f}", False),  # Megatron: the weights' norm
    "progress_pct": lambda r, kv, t, step: (f"progress{kv}{step % 1000 / 10:.1f}%", False),
}
EXTRAS = list(_EXTRAS)

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _overlay(line: str) -> str:
    """What a terminal shows of a line written with carriage returns (each part over the one before)."""
    shown = ""
    for part in line.split("\r"):
        shown = part + shown[len(part):]
    return shown.rstrip()


def dress(kind: str, text: str) -> str:
    """The log as saved: an Azure Pipelines step log, a tmux pane captured (`capture-pane -p -S -`, no -J: lines wrap at
    the pane's width), a PowerShell transcript (CRLF), a Kaggle notebook's JSON log, an LSF job report (`bsub -o`) or a
    CloudWatch Logs Insights result exported as CSV."""
    if kind not in DRESS:
        return tenth.dress(kind, text)
    lines = text.split("\n")[:-1]
    if kind == "azure_pipelines":
        head = ["##[section]Starting: Train", "=" * 78, "Task         : Command line",
                "Description  : Run a command line script using Bash on Linux and macOS and cmd.exe on Windows",
                "Version      : 2.231.1", "Author       : Microsoft Corporation",
                "Help         : https://docs.microsoft.com/azure/devops/pipelines/tasks/utility/command-line", "=" * 78,
                "Generating script.", "Script contents:", "python train.py",
                "========================== Starting Command Output ===========================",
                "[command]/usr/bin/bash --noprofile --norc /home/vsts/work/_temp/6f1c2b8e-0d4a-4c1e-9b7a-3e2f1d0c9b8a.sh"]
        every = [*head, *lines, "##[section]Finishing: Train"]
        return "".join(f"2026-11-28T03:{4 + k // 600 % 50:02d}:{k // 10 % 60:02d}.{(k * 7919) % 10_000_000:07d}Z {line}\n"
                       for k, line in enumerate(every))
    if kind == "tmux_capture":
        width = 100 + len(text) % 4 * 20
        out = ["alice@gpu-node-1:~/proj$ python train.py"]
        for line in lines:
            shown = _overlay(_ANSI.sub("", line))
            out += [shown[k:k + width] for k in range(0, len(shown), width)] or [""]
        return "\n".join([*out, "alice@gpu-node-1:~/proj$"]) + "\n"
    if kind == "ps_transcript":
        star = "*" * 22
        head = [star, "Windows PowerShell transcript start", "Start time: 20261128030405", "Username: GPU-WS\\alice",
                "RunAs User: GPU-WS\\alice", "Configuration Name: ", "Machine: GPU-WS (Microsoft Windows NT 10.0.22631.0)",
                "Host Application: C:\\Windows\\System32\\WindowsPowerShell\\v1.0\\powershell.exe", "Process ID: 14820",
                "PSVersion: 5.1.22621.4391", "PSEdition: Desktop", "BuildVersion: 10.0.22621.4391", "CLRVersion: 4.0.30319.42000",
                star, "Transcript started, output file is C:\\Users\\alice\\proj\\train.log", "PS C:\\Users\\alice\\proj> python train.py"]
        tail = ["PS C:\\Users\\alice\\proj> Stop-Transcript", star, "Windows PowerShell transcript end",
                "End time: 20261128052011", star]
        return "\r\n".join([*head, *lines, *tail]) + "\r\n"
    if kind == "kaggle_log":
        items = [json.dumps({"stream_name": "stdout", "time": round(5.873 + k * 1.371 + k * k % 97 / 1000, 6), "data": line + "\n"},
                            ensure_ascii=False, separators=(",", ":")) for k, line in enumerate(lines)]
        return "[" + "\n,".join(items) + "\n]"
    if kind == "lsf_report":
        host = "<gpu-node-17>"
        head = ["Sender: LSF System <lsfadmin@gpu-node-17>", "Subject: Job 4827113: <python train.py> in cluster <hpc1> Done", "",
                "Job <python train.py> was submitted from host <login2> by user <alice> in cluster <hpc1> at Sat Nov 28 03:01:12 2026",
                f"Job was executed on host(s) {host}, in queue <gpu>, as user <alice> in cluster <hpc1> at Sat Nov 28 03:01:15 2026",
                "</home/alice> was used as the home directory.", "</home/alice/proj> was used as the working directory.",
                "Started at Sat Nov 28 03:01:15 2026", "Terminated at Sat Nov 28 05:03:41 2026",
                "Results reported at Sat Nov 28 05:03:41 2026", "", "Your job looked like:", "",
                "-" * 60, "# LSBATCH: User input", "python train.py", "-" * 60, "", "Successfully completed.", "",
                "Resource usage summary:", "", f"    CPU time :{'7311.52 sec.':>50}", f"    Max Memory :{'8123 MB':>48}",
                f"    Average Memory :{'7012.45 MB':>44}", f"    Total Requested Memory :{'-':>36}", f"    Delta Memory :{'-':>46}",
                f"    Max Swap :{'-':>50}", f"    Max Processes :{'4':>45}", f"    Max Threads :{'37':>47}",
                f"    Run time :{'7346 sec.':>50}", f"    Turnaround time :{'7349 sec.':>43}", "",
                "The output (if any) follows:", ""]
        return "\n".join([*head, *lines, "", "", "PS:", "", "Read file <train.4827113.err> for stderr output of this job.", ""])
    buf = io.StringIO()  # cloudwatch_csv
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["@timestamp", "@message"])
    for k, line in enumerate(lines):
        writer.writerow([f"2026-11-28 03:{4 + k // 600 % 50:02d}:{k // 10 % 60:02d}.{k * 37 % 1000:03d}", line])
    return buf.getvalue()
