"""Processes and launchers: torchrun rendezvous and ports, exit codes, signals, segfaults, hangs."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from stethoscope.explain.model import RESUME, Detail, Hit, Line, Signature, first_group, lines_after, rx
from stethoscope.findings.catalogue import CRASH, HANG


# -- parsers ------------------------------------------------------------------------------------

_EXITCODE = re.compile(r"exitcode\s*:?\s*(-?\d+)")
_LOCAL_RANK = re.compile(r"\brank\s*:\s*(\d+)|local_rank:\s*(\d+)")
_SIGNAL = re.compile(r"Signal (\d+) \((SIG\w+)\)")
_ROOT_CAUSE = re.compile(r"Root Cause \(first observed failure\)")
EXIT_MEANING = {
    -9: "SIGKILL: killed from outside, most often by the host's out-of-memory killer",
    -6: "SIGABRT: a C++ abort (NCCL watchdog tearing the process down, an uncaught c10::Error)",
    -11: "SIGSEGV: a crash in native code (extension built for another torch/CUDA, driver)",
    -7: "SIGBUS: shared memory exhausted (DataLoader workers in a container with a small /dev/shm)",
    -15: "SIGTERM: stopped by the scheduler (time limit, preemption) or by a person",
    1: "a Python exception on that rank: its traceback is above in that rank's output",
}


def parse_child_failed(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    window = list(dict.fromkeys(line for h in hits for line in lines_after(h, lines, 40)))
    texts = [line.text for line in window]
    codes = sorted({int(m.group(1)) for text in texts if (m := _EXITCODE.search(text))})
    signals = sorted({m.group(2) for text in texts if (m := _SIGNAL.search(text))})
    ranks = sorted({int(m.group(1) or m.group(2)) for text in texts if (m := _LOCAL_RANK.search(text))})
    evidence: dict[str, Any] = {"exit_codes": codes, "signals": signals, "failed_ranks": ranks}
    root = next((i for i, text in enumerate(texts) if _ROOT_CAUSE.search(text)), None)
    root_rank = root_code = None
    if root is not None:
        block = texts[root : root + 8]
        root_rank = next((int(m.group(1) or m.group(2)) for t in block if (m := _LOCAL_RANK.search(t))), None)
        root_code = next((int(m.group(1)) for t in block if (m := _EXITCODE.search(t))), None)
        evidence.update(root_cause_rank=root_rank, root_cause_exit_code=root_code)
    ordered = ([root_code] if root_code is not None else []) + [c for c in codes if c != root_code]
    causes = tuple(EXIT_MEANING[c] for c in ordered if c in EXIT_MEANING)
    summary = f"root cause rank {root_rank}, exit code {root_code}" if root_code is not None \
        else ", ".join([f"exit code {c}" for c in codes] + signals)
    return Detail(evidence=evidence, summary=summary, causes=causes)


_PORT = re.compile(r"(?:port[:= ]\s*|MASTER_PORT=|\]:|:)(\d{4,5})\b")


def parse_port(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    window = [line.text for h in hits for line in lines_after(h, lines, 3)]
    port = next((m.group(1) for text in window if (m := _PORT.search(text))), None)
    if port is None:
        return Detail()
    return Detail(evidence={"port": int(port)}, summary=f"port {port}")


_CANCEL = re.compile(r"DUE TO ([A-Z ]+?)\s*\*{3}|DUE TO ([A-Z ]+)")


def parse_interrupt(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    m = first_group(hits, _CANCEL)
    if not m:
        return Detail()
    reason = (m.group(1) or m.group(2)).strip().lower()
    if "node fail" in reason:
        return Detail(evidence={"reason": reason}, summary=f"cancelled due to {reason}", severity="error",
                      causes=("the node failed (hardware, network or the node daemon)",),
                      fixes=("resubmit excluding that node and report it to the cluster admins",))
    return Detail(evidence={"reason": reason}, summary=f"cancelled due to {reason}")


# -- signatures ---------------------------------------------------------------------------------

ADDRESS_IN_USE = Signature(
    "address_in_use", rx(r"Address already in use", r"EADDRINUSE", r"errno: 98\b",
                          r"server socket has failed to listen on any local network address"),
    CRASH, "error", "Rendezvous port already in use (MASTER_PORT)",
    ("another job or a leftover process from an earlier run holds MASTER_PORT (29500 by default) on "
     "this node",),
    ("pick a free port: torchrun --master_port=PORT (e.g. derived from the job id), or "
     "--rdzv-endpoint=localhost:0 / --standalone on one node",
     "find and stop the stale process: ss -ltnp | grep PORT, or lsof -i :PORT"),
    parse_port)


RENDEZVOUS_TIMEOUT = Signature(
    "rendezvous_timeout", rx(r"Timed out after \d+ seconds waiting for clients", r"RendezvousTimeoutError",
                              r"client socket has timed out after", r"DistStoreError", r"connect\(\) timed out"),
    CRASH, "error", "Distributed rendezvous timed out",
    ("not every node started, or they cannot reach MASTER_ADDR:MASTER_PORT (wrong address, firewall)",),
    ("check that all nodes launched with the same MASTER_ADDR/MASTER_PORT and world size",
     "test reachability from a worker: nc -zv MASTER_ADDR MASTER_PORT"))


SEGFAULT = Signature(
    "segfault", rx(r"Segmentation fault", r"\bSIGSEGV\b", r"exitcode\s*:\s*-11\b", r"signal 11\b"),
    CRASH, "error", "Segmentation fault",
    ("a crash in native code: an extension built for another torch/CUDA, a DataLoader worker forked "
     "with threads (OpenCV, tokenizers), a driver bug",),
    ("rerun with python -X faulthandler (or PYTHONFAULTHANDLER=1) to get the Python stack",
     "rerun with num_workers=0 to see whether a DataLoader worker is the culprit",
     "rebuild/reinstall compiled extensions for the installed torch"))


FAULTHANDLER_TIMEOUT = Signature(
    "faulthandler_timeout", rx(r"^Timeout \(\d+:\d{2}:\d{2}\)!"),
    HANG, "error", "No progress before the faulthandler timeout (hang)",
    ("the process made no progress for the configured timeout: a collective waiting on another rank, "
     "a DataLoader deadlock, slow I/O",),
    ("read the thread stacks dumped right after this line: the main thread's innermost frame is where "
     "it waited",))


INTERRUPTED = Signature(
    # Not torchrun's "Signal 15 (SIGTERM) received by PID": that is how it stops the other workers
    # after one failed; SignalException is torchrun itself receiving the signal.
    "interrupted", rx(r"^KeyboardInterrupt", r"received SIGTERM", r"SignalException: Process \d+ got signal",
                       r"CANCELLED AT .* DUE TO"),
    CRASH, "warning", "Run stopped by a signal (interrupt, time limit, preemption)",
    ("the job was stopped from outside: Ctrl-C, the scheduler's time limit or a preemption",),
    ("save a checkpoint when SIGTERM arrives (a handler sets a flag; the loop saves at the next step)",
     "request a signal before the limit (sbatch --signal=USR1@120) and requeue",
     RESUME),
    parse_interrupt)


CHILD_FAILED = Signature(
    "child_failed", rx(r"ChildFailedError", r"elastic\.multiprocessing\.api:failed \(exitcode"),
    CRASH, "error", "A training process failed (torchrun)",
    ("torchrun only reports that a child process died: the real error is in that rank's own output",),
    ("read the traceback of the rank named as root cause (run with --tee 3 / --log-dir to keep each "
     "rank's output)",),
    parse_child_failed, role="wrapper")
