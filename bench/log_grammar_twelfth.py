"""The twelfth held-out part's printed forms (`log_grammar`), from trainers, launchers and tools whose printed shapes
the earlier parts did not hold, written as they print: MMEngine's LogProcessor (`2026/11/28 03:04:05 - mmengine - INFO -
Epoch(train)  [1][ 50/1000]  base_lr: 2.0000e-02 lr: 2.0000e-02  eta: 1 day, 3:12:44  time: 0.4123  data_time: ..
memory: 3456  grad_norm: ..  loss: ..  loss_cls: ..`, or `Iter(train) [  50/90000]  ..`), nanoGPT (`iter 100: loss 2.3456,
time 123.45ms, mfu -100.00%`), OpenNMT-tf (`2026-11-28 03:04:05.123000: I training.py:176] Step = 100 ; steps/s = 2.36,
source words/s = 18254, target words/s = 15822 ; Learning rate = 0.000012 ; Loss = 10.012396`), JoeyNMT (`Epoch   1,
Step:      100, Batch Loss:     5.123456, Batch Acc: .., Tokens per Sec:     4567, Lr: 0.000200`), WeNet (`Epoch 0 TRAIN
info lr 0.0008`, then `TRAIN Batch 300/1234 loss 45.678901 loss_att .. loss_ctc .. lr 0.00080000 rank 0`: the batch within
the epoch), Acme's TerminalLogger (`[Learner] Actor Episodes = 12 | Actor Steps = 34567 | Learner Steps = 100 | Learner
Walltime = 12.345 | Loss = 1.234`: the actor's steps are not the learner's), CLU's LoggingWriter (`[100] learning_rate=0.1,
loss=2.30259, train_accuracy=0.12`, keys sorted), build-nanogpt (`step   100 | loss: 3.456789 | lr 6.0000e-04 | norm:
0.2345 | dt: 123.45ms | tok/sec: 123456.78`), llm.c (`step  100/5000 | loss 3.456789 (+0.12z)| norm 0.2345 (-0.40z)| lr
6.00e-04 | 123.45 ms | 523412 tok/s`) and the Flax examples' `Finished training step 100. Batch size: 512, Loss: 3.45678,
LR: 0.00060`; GNU `date`, cmd's `%DATE% %TIME%` and daemontools' TAI64N stamps, Ruby's and Elixir's loggers (Elixir's with
a blank line before each message), Determined's `[rank=0] ` and `fly logs`' prefixes; logs saved as a Jupyter notebook
(.ipynb), `journalctl -o json` (messages with control characters as byte arrays), an Airflow task log, `gcloud logging
read --format=json` and an ansi2html page; WeNet's CV line, MMEngine's checkpoint line, Acme's actor line, CLU's progress
notes, llm.c's HellaSwag line and nanoGPT's checkpoint line between the records.

Each function takes the twelfth part's names and hands any other to `log_grammar_eleventh` (the parts before render as
they did). Scored once (session 10): 72.10% recovered, 9.90% refused, 6.30% partial, 11.70% misread of 2,000 logs; it
is spent (SPENT12)."""

from __future__ import annotations

import html
import json
import math
import re
from datetime import timedelta

import log_grammar_eleventh as eleventh
import log_grammar_forms as forms

FORCED = eleventh.FORCED
EPOCH_ONLY = eleventh.EPOCH_ONLY
EPOCHAL = (*eleventh.EPOCHAL, "wenet_batch")  # from step 0: its epochs are numbered from the run's start
HEADED = eleventh.HEADED
STEPLESS = eleventh.STEPLESS
COUNTERS = ("mmengine_log", "nanogpt_iter", "opennmt_tf_step", "joeynmt_step", "wenet_batch", "acme_learner",
            "clu_scalars", "buildgpt_step", "llmc_step", "flax_finished_step")  # records under their own names
FROM_ONE = (*eleventh.FROM_ONE, "mmengine_log", "opennmt_tf_step", "joeynmt_step", "acme_learner", "clu_scalars",
            "llmc_step")  # counted after the step is taken: never 0
NEW = (*eleventh.NEW, *COUNTERS)  # the counters of the sixth .. twelfth parts (records built here)

DATES = ["gnu_date", "cmd_date_time", "tai64n"]
LOGGERS = ["ruby_logger", "elixir_logger"]
RANKS = ["determined_rank", "flyio_app"]
DRESS = ["jupyter_ipynb", "journald_json", "airflow_task", "gcloud_json", "ansi2html"]
LOSS_NAMES = ["mean_loss", "train.loss", "avg.loss"]
CADENCES = ["14", "36", "800"]
EVALS = ["nanogpt_eval", "joeynmt_valid", "llmc_val"]
BETWEEN = ["wenet_cv", "mmengine_ckpt", "acme_actor", "clu_progress", "llmc_hellaswag", "nanogpt_ckpt"]

_DAY = 1_795_824_000  # 2026-11-28 00:00:00 UTC in unix seconds


def _hms(t: int) -> tuple[int, int, int]:
    return eleventh._hms(t)


def date(kind: str, t: int) -> str:
    h, m, s = _hms(t)
    if kind == "gnu_date":
        return f"Sat Nov 28 {h:02d}:{m:02d}:{s:02d} UTC 2026 "
    if kind == "cmd_date_time":  # %TIME% pads the hour with a space
        return f"Sat 11/28/2026 {h:2d}:{m:02d}:{s:02d}.{t * 7 % 100:02d} "
    if kind == "tai64n":  # multilog/svlogd: @ + 2^62 + 10 + unix seconds, then nanoseconds, in hex
        return f"@{2 ** 62 + 10 + _DAY + h * 3600 + m * 60 + s:016x}{t * 7_919_123 % 1_000_000_000:08x} "
    return eleventh.date(kind, t)


def logger(kind: str) -> str:
    out = {"ruby_logger": "I, [2026-11-28T03:04:05.123456 #4312]  INFO -- : ",
           "elixir_logger": "\n03:04:05.123 [info] "}.get(kind)  # Elixir's default format starts with a newline
    return eleventh.logger(kind) if out is None else out


def rank(kind: str, t: int = 0) -> str:
    if kind == "determined_rank":
        return "[rank=0] "
    if kind == "flyio_app":
        h, m, s = _hms(t)
        return f"2026-11-28T{h:02d}:{m:02d}:{s:02d}Z app[148e272a] ord [info]"
    return eleventh.rank(kind, t)


def table_header(kind: str) -> str:
    return eleventh.table_header(kind)


def loss_text(kind: str, r: forms.Rand) -> str:
    """The train loss as this counter's trainer prints it."""
    if kind not in COUNTERS:
        return eleventh.loss_text(kind, r)
    value = 2.0 + 3.0 * r.random()
    if kind == "clu_scalars":  # a Python float: `.6g`; a float32 array: its float64 repr
        return eleventh._f32(value / 2) if int(value * 7) % 2 else f"{value / 2:.6g}"
    return {"mmengine_log": f"{value / 2:.4f}", "nanogpt_iter": f"{value:.4f}", "opennmt_tf_step": f"{value * 2:f}",
            "joeynmt_step": f"{value:.6f}", "wenet_batch": f"{value * 15:.6f}", "acme_learner": f"{value / 3:.3f}",
            "buildgpt_step": f"{value:.6f}", "llmc_step": f"{value:.6f}", "flax_finished_step": f"{value * 2:.5f}"}[kind]


def _absl(t: int, where: str) -> str:
    """absl's prefix (glog's layout): level, month and day, time with microseconds, thread id, file:line."""
    h, m, s = _hms(t)
    return f"I1128 {h:02d}:{m:02d}:{s:02d}.{t * 7919 % 1_000_000:06d} 140023579745408 {where}] "


def _py_time(t: int, sep: str = ",") -> str:
    h, m, s = _hms(t)
    return f"2026-11-28 {h:02d}:{m:02d}:{s:02d}{sep}{t * 37 % 1000:03d}"


def record(kind: str, step: int, total: int, per_epoch: int, r: forms.Rand, fields: list[str], sep: str,
           loss: str, cadence: int) -> str:
    """A record of a twelfth-part counter (or an earlier one), as its trainer prints it."""
    if kind not in COUNTERS:
        return eleventh.record(kind, step, total, per_epoch, r, fields, sep, loss, cadence)
    t = 0.2 + r.random() * 0.3
    v = float(loss)
    lr = 6e-4 * (1 - step / total)
    if kind == "mmengine_log":
        h, m, s = _hms(step * 3)
        if per_epoch % 2:  # by epoch: the iteration within the epoch, from 1; the epoch right-aligned to the last's width
            epoch, it = eleventh._in_epoch(step, per_epoch)
            head = (f"Epoch(train){f'[{epoch}]'.rjust(len(str(total // per_epoch + 1)) + 3)}"
                    f"[{str(it).rjust(len(str(per_epoch)))}/{per_epoch}]  ")
        else:
            head = f"Iter(train) [{str(step).rjust(len(str(total)))}/{total}]  "
        base = f"{0.02 * (1 - step / total):.4e}"
        return (f"2026/11/28 {h:02d}:{m:02d}:{s:02d} - mmengine - INFO - {head}base_lr: {base} lr: {base}  "
                f"eta: {timedelta(seconds=int((total - step) * t * 40))}  time: {t:.4f}  data_time: {t / 23:.4f}  "
                f"memory: {3000 + per_epoch % 997}  grad_norm: {2 + 3 * r.random():.4f}  loss: {loss}  "
                f"loss_cls: {v * 0.62:.4f}  acc: {80 + 19 * r.random():.4f}  loss_bbox: {v * 0.38:.4f}")
    if kind == "nanogpt_iter":  # MFU is -100% until five iterations have run
        mfu = -100.0 if step % 1000 < 5 else 30 + 10 * r.random()
        return f"iter {step}: loss {loss}, time {t * 1000:.2f}ms, mfu {mfu:.2f}%"
    if kind == "opennmt_tf_step":
        return (f"{_py_time(step * 3, '.')}000: I training.py:176] Step = {step} ; steps/s = {1 / t:.2f}, source words/s = "
                f"{int(18000 / t / 8)}, target words/s = {int(16000 / t / 8)} ; Learning rate = {lr / 50:f} ; Loss = {loss}")
    if kind == "joeynmt_step":
        epoch = (step - 1) // per_epoch + 1
        return (f"{_py_time(step * 3)} - INFO - joeynmt.training - Epoch {epoch:3d}, Step: {step:8d}, Batch Loss: "
                f"{loss:>12}, Batch Acc: {0.1 + 0.5 * step / total:.6f}, Tokens per Sec: {4000 / t:8.0f}, Lr: {lr / 3:.6f}")
    if kind == "wenet_batch":  # the batch within the epoch, from 0; the epoch only in the header before it
        epoch, batch = divmod(step, per_epoch)
        line = (f"{_py_time(step * 3)} DEBUG TRAIN Batch {batch}/{per_epoch} loss {loss} loss_att {v * 0.93:.6f} "
                f"loss_ctc {v * 1.16:.6f} lr {lr:.8f} rank 0")
        if step >= cadence and (step - cadence) // per_epoch == epoch:
            return line
        cv = f"{_py_time(step * 3 - 1)} INFO Epoch {epoch - 1} CV info cv_loss {v * 0.9:.4f}\n" if epoch else ""
        return f"{cv}{_py_time(max(step * 3 - 1, 0))} INFO Epoch {epoch} TRAIN info lr {lr!r}\n{line}"
    if kind == "acme_learner":  # keys sorted, title-cased; a counter shared with the actors adds theirs
        actors = f"Actor Episodes = {step // 7} | Actor Steps = {step * 250 + 17} | " if per_epoch % 2 else ""
        return f"{_absl(step * 3, 'terminal.py:91')}[Learner] {actors}Learner Steps = {step} | Learner Walltime = {step * t:.3f} | Loss = {loss}"
    if kind == "clu_scalars":
        pre = _absl(step * 3, "logging_writer.py:48")
        if len(loss.split(".")[-1]) > 6:  # jax arrays: written in full; the rates on lines of their own
            acc = eleventh._f32(0.2 + 0.5 * step / total)
            return (f"{pre}[{step}] train_accuracy={acc}, train_loss={loss}, train_perplexity={eleventh._f32(math.exp(v))}\n"
                    f"{pre}[{step}] steps_per_sec={1 / t:.6g}\n{pre}[{step}] uptime={step * t + 120:.6g}")
        return f"{pre}[{step}] learning_rate={lr * 100:.6g}, loss={loss}, train_accuracy={0.1 + 0.8 * step / total:.6g}"
    if kind == "buildgpt_step":
        return (f"step {step:5d} | loss: {loss} | lr {lr:.4e} | norm: {0.2 + r.random():.4f} | dt: {t * 1000:.2f}ms | "
                f"tok/sec: {524288 / t:.2f}")
    if kind == "llmc_step":  # the step printed from 1; z-scores after the loss and the norm
        return (f"step {step:4d}/{total} | loss {loss} ({r.random() * 2 - 1:+.2f}z)| norm {0.2 + r.random():6.4f} "
                f"({r.random() * 2 - 1:+.2f}z)| lr {lr:.2e} | {t * 1000:.2f} ms | {524288 / t:.0f} tok/s")
    if kind == "flax_finished_step":
        return f"{_absl(step * 3, 'train.py:570')}Finished training step {step}. Batch size: 512, Loss: {loss}, LR: {lr:.5f}"
    raise KeyError(kind)


def eval_line(kind: str, step: int, value: str, kv: str, counter: str = "") -> str:
    v = float(value)
    if kind == "nanogpt_eval":  # the train loss here is an estimate over eval batches, not a record's
        return f"step {step}: train loss {v * 0.97:.4f}, val loss {v:.4f}"
    if kind == "joeynmt_valid":
        return (f"Validation result (greedy) at epoch {1 + step // 1000:3d}, step {step:8d}: bleu: {10 + step % 29:6.2f}, "
                f"loss: {v:8.4f}, ppl: {math.exp(v):8.4f}, duration: {12 + step % 7 / 3:.4f}s")
    if kind == "llmc_val":
        return f"val loss {v:f}"
    return eleventh.eval_line(kind, step, value, kv, counter)


def between(kind: str, step: int, r: forms.Rand, counter: str = "") -> str:
    """A line printed between the records (by another tool). In a WeNet log, whose epoch is only in its headers, a line
    that names another epoch prints blank, as MONAI's do."""
    if kind not in _BETWEEN:
        return eleventh.between(kind, step, r, counter)
    line = _BETWEEN[kind](step, int(r.random() * 100))
    return "" if counter == "wenet_batch" and kind in _EPOCHS else line


_EPOCHS = ("wenet_cv",)  # lines that name an epoch
_BETWEEN = {
    "wenet_cv": lambda step, n: f"Epoch {step // 1000} CV info cv_loss {30 + n / 7:.4f}",
    "mmengine_ckpt": lambda step, n: f"2026/11/28 03:04:05 - mmengine - INFO - Saving checkpoint at {step} iterations",
    "acme_actor": lambda step, n: (f"{_absl(step * 3 + 1, 'terminal.py:91')}[Actor] Actor Episodes = {step // 7 + n} | "
                                   f"Actor Steps = {step * 250 + n * 31} | Episode Length = 1000 | Episode Return = "
                                   f"{n * 12.5:.3f} | Steps Per Second = {900 + n * 3.7:.3f}"),
    "clu_progress": lambda step, n: (f"{_absl(step * 3 + 1, 'local.py:41')}Setting work unit notes: {3 + n / 100:.1f} steps/s, "
                                     f"{step / 5000:.1f}% ({step}/500000), ETA: 1d{18 + n % 5}h{n % 60}m "
                                     f"({n}m : {4 + n / 50:.1f}% data, {94 - n / 50:.1f}% train_step)"),
    "llmc_hellaswag": lambda step, n: f"HellaSwag: {2500 + n * 3}/10042 = {(2500 + n * 3) / 10042:f}",
    "nanogpt_ckpt": lambda step, n: "saving checkpoint to out",
}


def extra(kind: str, r: forms.Rand, kv: str, step: int) -> tuple[str, bool] | None:
    """A twelfth-part metric as printed (whether it is a step time), or an earlier part's, or None for the others."""
    if kind not in _EXTRAS:
        return eleventh.extra(kind, r, kv, step)
    return _EXTRAS[kind](r, kv, 0.2 + r.random() * 0.3, step)


_EXTRAS = {
    "norm_bare": lambda r, kv, t, step: (f"norm{kv}{0.2 + r.random():.4f}", False),  # the gradient's norm, build-nanogpt's name
    "tok_per_sec": lambda r, kv, t, step: (f"tok/sec{kv}{524288 / t:.2f}", False),
    "memory_bare": lambda r, kv, t, step: (f"memory{kv}{3000 + int(r.random() * 900)}", False),  # MB, no unit (MMEngine)
    "zscore_paren": lambda r, kv, t, step: (f"({r.random() * 2 - 1:+.2f}z)", False),  # llm.c: after the metric before it
    "accum_step": lambda r, kv, t, step: (f"Accumulation Step{kv}{step % 997 // 10 + 1:3d}", False),  # optimizer steps this epoch
}
EXTRAS = list(_EXTRAS)

_SGR = re.compile(r"\x1b\[([0-9;]*)m")
_ESC = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _message(line: str) -> object:
    """journald's MESSAGE field in `-o json`: a string, or its UTF-8 bytes where it holds control characters."""
    return line if not any(c < " " and c != "\t" or "\x7f" <= c <= "\x9f" for c in line) else list(line.encode())


def _html(text: str) -> str:
    """ansi2html's content: HTML escaped, SGR colours as spans, other escapes dropped."""
    out, open_ = [], False
    for k, part in enumerate(_SGR.split(html.escape(text, quote=False))):
        if k % 2 == 0:
            out.append(_ESC.sub("", part))
            continue
        codes = [c for c in part.split(";") if c not in ("", "0")]
        out.append(("</span>" if open_ else "") + (f'<span class="{" ".join("ansi" + c for c in codes)}">' if codes else ""))
        open_ = bool(codes)
    return "".join(out) + ("</span>" if open_ else "")


def dress(kind: str, text: str) -> str:
    """The log as saved: a Jupyter notebook that ran `!python train.py`, `journalctl -o json` of a service, an Airflow
    BashOperator's task log, `gcloud logging read --format=json --order=asc` of a GKE pod or an ansi2html page."""
    if kind not in DRESS:
        return eleventh.dress(kind, text)
    lines = text.split("\n")[:-1]
    if kind == "jupyter_ipynb":  # nbformat 4 as Jupyter writes it: indent 1, keys sorted, not ASCII-escaped
        cell = {"cell_type": "code", "execution_count": 7, "id": "5c2f8e1a", "metadata": {},
                "outputs": [{"name": "stdout", "output_type": "stream", "text": [ln + "\n" for ln in lines]}],
                "source": ["!python train.py --config configs/base.yaml"]}
        nb = {"cells": [cell], "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                                          "name": "python3"},
                                            "language_info": {"name": "python", "version": "3.11.9"}},
              "nbformat": 4, "nbformat_minor": 5}
        return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    if kind == "journald_json":
        return "".join(json.dumps({"__CURSOR": f"s=8f0c2a;i={0x1a2b3 + k:x};b=4e1d9c;m={k * 977:x};t=62d1{k:08x};x=9c3e",
                                   "__REALTIME_TIMESTAMP": str((_DAY + 3 * 3600 + k) * 1_000_000 + k * 7919 % 1_000_000),
                                   "__MONOTONIC_TIMESTAMP": str(812_345_678 + k * 1_000_003), "_BOOT_ID": "4e1d9c0b",
                                   "PRIORITY": "6", "SYSLOG_FACILITY": "3", "_TRANSPORT": "stdout", "_UID": "1000",
                                   "_COMM": "python", "_EXE": "/usr/bin/python3.11", "_CMDLINE": "python train.py",
                                   "_SYSTEMD_UNIT": "train.service", "SYSLOG_IDENTIFIER": "python", "_PID": "4312",
                                   "_HOSTNAME": "gpu-node-1", "MESSAGE": _message(line)}, ensure_ascii=False,
                                  separators=(",", ":")) + "\n"
                       for k, line in enumerate(lines))
    if kind == "airflow_task":  # each output line rstripped by the subprocess hook, behind Airflow's own prefix
        def at(k: int, where: str, msg: str) -> str:
            return f"[2026-11-28, 03:{4 + k // 600 % 50:02d}:{k // 10 % 60:02d} UTC] {{{where}}} INFO - {msg}"
        ti = "<TaskInstance: train_model.train manual__2026-11-28T03:00:00+00:00 [queued]>"
        head = [at(0, "taskinstance.py:1157", f"Dependencies all met for dep_context=non-requeueable deps ti={ti}"),
                at(0, "taskinstance.py:1359", "Starting attempt 1 of 1"),
                at(0, "subprocess.py:63", "Tmp dir root location: /tmp"),
                at(0, "subprocess.py:75", "Running command: ['/usr/bin/bash', '-c', 'python train.py']"),
                at(0, "subprocess.py:86", "Output:")]
        body = [at(k, "subprocess.py:93", line.rstrip()) for k, line in enumerate(lines)]
        tail = [at(len(lines), "subprocess.py:97", "Command exited with return code 0"),
                at(len(lines), "taskinstance.py:1400", "Marking task as SUCCESS. dag_id=train_model, task_id=train, "
                   "execution_date=20261128T030000, start_date=20261128T030112, end_date=20261128T050341"),
                at(len(lines), "local_task_job_runner.py:228", "Task exited with return code 0")]
        return "\n".join([*head, *body, *tail]) + "\n"
    if kind == "gcloud_json":
        def stamp(k: int) -> str:
            return f"2026-11-28T03:{4 + k // 600 % 50:02d}:{k // 10 % 60:02d}.{k * 7919 % 1_000_000_000:09d}Z"
        entries = [{"insertId": f"{k * 2654435761 % 16 ** 12:012x}", "labels": {"compute.googleapis.com/resource_name": "gke-pool-1"},
                    "logName": "projects/ml-proj/logs/stdout", "receiveTimestamp": stamp(k + 3),
                    "resource": {"labels": {"cluster_name": "train", "container_name": "trainer", "location": "us-central1",
                                            "namespace_name": "default", "pod_name": "trainer-0", "project_id": "ml-proj"},
                                 "type": "k8s_container"},
                    "severity": "INFO", "textPayload": line, "timestamp": stamp(k)} for k, line in enumerate(lines)]
        return json.dumps(entries, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    style = "\n".join(f".ansi{c} {{ color: {col}; }}" for c, col in (("31", "#aa0000"), ("32", "#00aa00"), ("33", "#aa5500"),
                                                                      ("34", "#0000aa"), ("35", "#E850A8"), ("36", "#00aaaa")))
    head = ['<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN" "http://www.w3.org/TR/html4/loose.dtd">', "<html>",
            "<head>", '<meta http-equiv="Content-Type" content="text/html; charset=utf-8">', "<title>train.log</title>",
            '<style type="text/css">', ".ansi2html-content { display: inline; white-space: pre-wrap; word-wrap: break-word; }",
            ".body_foreground { color: #AAAAAA; }", ".body_background { background-color: #000000; }",
            ".ansi1 { font-weight: bold; }", style, "</style>", "</head>",
            '<body class="body_foreground body_background" style="font-size: normal;" >', '<pre class="ansi2html-content">']
    return "\n".join([*head, _html(text) + "</pre>", "</body>", "", "</html>"]) + "\n"
