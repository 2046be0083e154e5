"""The fourteenth held-out part's lines between the records and the ways its logs are saved (`log_grammar`; the part's
other forms are in `log_grammar_fourteenth.py`, which hands these kinds here and any other to `log_grammar_thirteenth`).

Between the records: `nvidia-smi dmon`'s two header lines and a row of numbers, a CUDA out-of-memory traceback the
trainer caught (it skipped the batch and went on), KerasTuner's trial summary, Ray Tune's trial status table (a `loss`
column of its trials), PyTorch's c10d barrier warning (`[rank0]:[W1128 03:04:05.123456789 ProcessGroupNCCL.cpp:4115]`)
and lm-evaluation-harness's result table (a checkpoint path with its step). Saved as `cat -n` prints a file (a line
number and a tab before each line), `journalctl -o export` (a block of fields a line; a message with control characters
as a binary field: its length in eight little-endian bytes), TeamCity service messages (`##teamcity[message text='..']`,
`|` escapes), `logcli query --forward` (a time and a label set before each line) and an e-mail reply quoting the log
(`> ` before each line).

Fixed before it was scored; not scored yet (score it once: `log_grammar_rates.py --held-out`)."""

from __future__ import annotations

import re
import struct

BETWEEN = ["nvidia_smi_dmon", "recovered_oom", "keras_tuner_trial", "ray_tune_status", "c10d_barrier", "lm_eval_table"]
DRESS = ["cat_n", "journal_export", "teamcity_msg", "loki_logcli", "email_quote"]

_ESC = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_DAY = 1_795_824_000  # 2026-11-28 00:00:00 UTC in unix seconds


def _dmon(step: int, n: int) -> str:
    head = ("# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk\n"
            "# Idx      W      C      C      %      %      %      %      %      %    MHz    MHz\n")
    row = (0, 250 + n % 60, 55 + n % 11, 48 + n % 9, 80 + n % 20, 30 + n % 40, 0, 0, 0, 0, 2619, 1980)
    return head + "".join(f"{v:>5}" if k == 0 else f"{v:>7}" for k, v in enumerate(row))


def _oom(step: int, n: int) -> str:
    return "\n".join([
        "Traceback (most recent call last):",
        '  File "/workspace/train.py", line 214, in train_step',
        "    loss.backward()",
        '  File "/usr/local/lib/python3.11/site-packages/torch/_tensor.py", line 581, in backward',
        "    torch.autograd.backward(",
        '  File "/usr/local/lib/python3.11/site-packages/torch/autograd/__init__.py", line 347, in backward',
        "    _engine_run_backward(",
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {1 + n % 4}.00 GiB. GPU 0 has a total capacity of "
        f"79.15 GiB of which {0.5 + n / 100:.2f} GiB is free. Including non-PyTorch memory, this process has "
        f"{78.5 - n / 100:.2f} GiB memory in use. Of the allocated memory 75.12 GiB is allocated by PyTorch, and "
        "1.54 GiB is reserved by PyTorch but unallocated.",
        f"OOM caught: skipped the batch and emptied the CUDA cache ({1 + n % 3} so far)"])


def _tuner(step: int, n: int) -> str:
    return (f"Trial {1 + n % 20} Complete [00h 00m {10 + n % 50:02d}s]\nval_loss: {0.3 + n / 200:.4f}\n\n"
            f"Best val_loss So Far: {0.3 + n / 400:.4f}\nTotal elapsed time: 00h {n % 60:02d}m {n * 7 % 60:02d}s")


def _tune(step: int, n: int) -> str:
    rows = [(f"train_fn_{n * 7919 % 99999:05d}_{k:05d}", "RUNNING" if k < 3 else "TERMINATED", f"{10 ** -(2 + k % 3):g}",
             f"{12 + k * 3 + n % 5}", f"{30 + k * 11.5 + n / 10:.4f}", f"{0.2 + (k + n % 7) / 25:.5f}") for k in range(4)]
    head = ("Trial name", "status", "lr", "iter", "total time (s)", "loss")
    widths = [max(len(r[c]) for r in (*rows, head)) for c in range(6)]
    cell = [lambda s, w: s.ljust(w), lambda s, w: s.ljust(w)] + [lambda s, w: s.rjust(w)] * 4

    def line(r: tuple[str, ...]) -> str:
        return "│ " + "   ".join(cell[c](r[c], widths[c]) for c in range(6)) + " │"
    width = len(line(head)) - 2
    return "\n".join(["Trial status: 3 RUNNING | 1 TERMINATED",
                      f"Current time: 2026-11-28 03:{4 + n % 50:02d}:{n % 60:02d}. Total running time: {n % 9}min {n % 60}s",
                      "Logical resource usage: 4.0/16 CPUs, 1.0/1 GPUs (0.0/1.0 accelerator_type:H100)",
                      "╭" + "─" * width + "╮", line(head), "├" + "─" * width + "┤", *(line(r) for r in rows),
                      "╰" + "─" * width + "╯"])


def _lm_eval(step: int, n: int) -> str:
    acc, norm = 0.3 + n / 400, 0.35 + n / 400
    return "\n".join([
        f"hf (pretrained=./checkpoints/step-{step}), gen_kwargs: (None), limit: None, num_fewshot: None, batch_size: 16",
        "|  Tasks  |Version|Filter|n-shot| Metric |   |Value |   |Stderr|",
        "|---------|------:|------|-----:|--------|---|-----:|---|-----:|",
        f"|hellaswag|      1|none  |     0|acc     |↑  |{acc:.4f}|±  |0.0046|",
        f"|         |       |none  |     0|acc_norm|↑  |{norm:.4f}|±  |0.0048|"])


_BETWEEN = {
    "nvidia_smi_dmon": _dmon,
    "recovered_oom": _oom,
    "keras_tuner_trial": _tuner,
    "ray_tune_status": _tune,
    "c10d_barrier": lambda step, n: (
        f"[rank0]:[W1128 03:04:{n % 60:02d}.{n * 7919 % 10 ** 9:09d} ProcessGroupNCCL.cpp:4115] [PG ID 0 PG GUID 0 Rank 0]  "
        "using GPU 0 to perform barrier as devices used by this process are currently unknown. This can potentially "
        "cause a hang if this rank to GPU mapping is incorrect. Specify device_ids in barrier() to force use of a "
        "particular device, or call init_process_group() with a device_id."),
    "lm_eval_table": _lm_eval,
}


def between(kind: str, step: int, n: int) -> str:
    return _BETWEEN[kind](step, n)


def _teamcity(s: str) -> str:
    """A value as TeamCity's service messages escape it: `|` before `|'[]`, `|n`/`|r`, other controls as `|0x001b`."""
    out = []
    for c in s:
        if c in "|'[]":
            out.append("|" + c)
        elif c == "\n":
            out.append("|n")
        elif c == "\r":
            out.append("|r")
        elif c < " " and c != "\t":
            out.append(f"|0x{ord(c):04x}")
        else:
            out.append(c)
    return "".join(out)


def _export_message(line: str) -> str:
    """journald's export format: MESSAGE=text, or, where the text holds control characters, the field name, a newline,
    the length in eight little-endian bytes and the raw bytes (here their code points)."""
    if all(c >= " " or c == "\t" for c in line):
        return f"MESSAGE={line}"
    raw = line.encode()
    return "MESSAGE\n" + "".join(map(chr, struct.pack("<Q", len(raw)))) + line


def dress(kind: str, text: str) -> str:
    lines = text.split("\n")[:-1]
    if kind == "cat_n":  # `cat -n train.log`: the line number right-aligned in six, then a tab
        return "".join(f"{k + 1:6d}\t{ln}\n" for k, ln in enumerate(lines))
    if kind == "journal_export":  # `journalctl -u train -o export`: a block of fields for each line, a blank line after
        out = []
        for k, line in enumerate(lines):
            usec = (_DAY + 3 * 3600 + 245 + k) * 1_000_000 + k * 7919 % 1_000_000
            mono = 86_400_000_000 + k * 1_000_123
            out += [f"__CURSOR=s=6f1e0b2c8d2a4c0e9b7d3a1f5e4c2b10;i={0x1a2b + k:x};b=0c9e7a4b2f1d4e3a8b6c5d7e9f0a1b2c;"
                    f"m={mono:x};t={usec:x};x={(k * 2654435761) % 2 ** 64:016x}", f"__REALTIME_TIMESTAMP={usec}",
                    f"__MONOTONIC_TIMESTAMP={mono}", "_BOOT_ID=0c9e7a4b2f1d4e3a8b6c5d7e9f0a1b2c", "PRIORITY=6",
                    "_TRANSPORT=stdout", "SYSLOG_IDENTIFIER=python3", "_PID=4312", "_COMM=python3",
                    "_SYSTEMD_UNIT=train.service", _export_message(line), ""]
        return "\n".join(out) + "\n"
    if kind == "teamcity_msg":  # a wrapper that reports each line as a service message, in a block
        out = ["##teamcity[blockOpened name='train' description='python train.py']"]
        out += [f"##teamcity[message text='{_teamcity(ln)}' status='NORMAL']" for ln in lines]
        return "\n".join([*out, "##teamcity[blockClosed name='train']"]) + "\n"
    if kind == "loki_logcli":  # `logcli query --forward '{app="trainer"}'`: the time, the stream's labels, the line
        out = []
        for k, line in enumerate(lines):
            t = 245 + k
            out.append(f"2026-11-28T{3 + t // 3600 % 20:02d}:{t // 60 % 60:02d}:{t % 60:02d}.{k * 37 % 1000:03d}Z "
                       f'{{app="trainer", container="pytorch", namespace="ml", pod="trainer-0"}} {line}')
        return "\n".join(out) + "\n"
    # an e-mail reply quoting the message that carried the log (a mail client drops the colours)
    head = ["Hi Jane,", "", "the spike is at the same place in my run, so it is not the data order. Does the loss come",
            "back down for you if you lower the learning rate?", "", "Bob", "",
            "On Sat, Nov 28, 2026 at 9:41 AM Jane Doe <jane@example.org> wrote:", "> Hi all,", ">",
            "> the loss stops going down after a while; the full log is below.", ">"]
    body = [">" if not ln else "> " + _ESC.sub("", ln) for ln in lines]
    return "\n".join([*head, *body, ">", "> Thanks,", "> Jane"]) + "\n"
