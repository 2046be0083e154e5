"""Parsers of numeric, process, launcher and file failures (overflow, NaN, torchrun, ports, checkpoints)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from typing import Any

from stethoscope.diagnose.log_model import Detail, Hit, Line, lines_after, first_group


# -- parsers: numerics --------------------------------------------------------------------------

_SCALE_NUM = r"([\d.]+(?:[eE][+-]?\d+)?)"
_ATTEMPTED = re.compile(r"Attempted loss scale: " + _SCALE_NUM)
_REDUCED = (re.compile(r"reducing to " + _SCALE_NUM), re.compile(r"reducing loss scale to " + _SCALE_NUM),
            re.compile(r"setting loss scale to:?\s*" + _SCALE_NUM))
_ANOMALY_OP = re.compile(r"Function '(\w+)' returned nan values")


def parse_overflow(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    scales = [float(m.group(1)) for h in hits for p in (_ATTEMPTED, *_REDUCED) if (m := p.search(h.line.text))]
    low = min(scales) if scales else None
    evidence: dict[str, Any] = {"overflows": len(hits), "min_loss_scale": low}
    severity = "info"
    if low is not None and low <= 1:
        severity = "error"
    elif (low is not None and low < 128) or len(hits) >= 50:
        severity = "warning"
    summary = f"{len(hits)} skipped step(s)" + (f", loss scale fell to {low:g}" if low is not None else "")
    return Detail(evidence=evidence, summary=summary, severity=severity)


def parse_nan(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    m = first_group(hits, _ANOMALY_OP)
    if not m:
        return Detail(evidence={"nan_lines": len(hits)})
    return Detail(evidence={"nan_lines": len(hits), "op": m.group(1)}, summary=f"first produced by {m.group(1)}",
                  causes=(f"autograd anomaly mode names {m.group(1)} as the first op to produce NaN",))


# -- parsers: processes, launchers, files -------------------------------------------------------

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


_MODULE = re.compile(r"No module named '([\w.]+)'")
_CANNOT_IMPORT = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")
PIP_NAMES = {"cv2": "opencv-python", "sklearn": "scikit-learn", "yaml": "pyyaml", "PIL": "pillow",
             "skimage": "scikit-image", "bs4": "beautifulsoup4", "attr": "attrs", "flash_attn": "flash-attn",
             "google.protobuf": "protobuf", "sentencepiece": "sentencepiece", "Crypto": "pycryptodome"}


def parse_module(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    m = first_group(hits, _MODULE)
    if m:
        name = m.group(1)
        top = name.split(".")[0]
        package = PIP_NAMES.get(name) or PIP_NAMES.get(top) or top.replace("_", "-")
        return Detail(evidence={"module": name, "package": package}, summary=f"no module named {name!r}",
                      fixes=(f"install it into the environment the job runs in: pip install {package}",))
    m = first_group(hits, _CANNOT_IMPORT)
    if m:
        return Detail(evidence={"name": m.group(1), "module": m.group(2)},
                      summary=f"cannot import {m.group(1)!r} from {m.group(2)!r}",
                      causes=(f"the installed {m.group(2).split('.')[0]} is older or newer than the code "
                              f"expects: {m.group(1)!r} moved or does not exist in that version",))
    return Detail()


_PATH = re.compile(r"'(/[^']+)'|\"(/[^\"]+)\"")


def parse_disk(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    m = first_group(hits, _PATH)
    if not m:
        return Detail()
    path = m.group(1) or m.group(2)
    causes = ("/dev/shm is full: DataLoader workers pass batches through shared memory",) \
        if path.startswith("/dev/shm") else ()
    return Detail(evidence={"path": path}, summary=path, causes=causes)


_GLOBAL = re.compile(r"Unsupported global: GLOBAL ([\w.]+)")


def parse_weights_only(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    window = [line.text for h in hits for line in lines_after(h, lines, 8)]
    name = next((m.group(1) for text in window if (m := _GLOBAL.search(text))), None)
    if name is None:
        return Detail()
    short = name.rsplit(".", 1)[-1]
    return Detail(evidence={"global": name}, summary=f"the checkpoint pickles {name}",
                  fixes=(f"if you trust the file: torch.serialization.add_safe_globals([{short}]) before "
                         "torch.load",))


_LFS = re.compile(r"invalid load key, 'v'")


def parse_corrupt(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    if first_group(hits, _LFS):
        return Detail(evidence={"git_lfs_pointer": True}, summary="the file is a git-lfs pointer, not weights",
                      causes=("the checkpoint is a git-lfs pointer file (it starts with 'version https://"
                              "git-lfs…'): the repository was cloned without `git lfs pull`",),
                      fixes=("run `git lfs pull` (or download the file itself) and load again",))
    return Detail()


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


_PARAM_INDICES = re.compile(r"did not receive grad for rank (\d+): ([\d ]+)")


def parse_unused(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    window = [line.text for h in hits for line in lines_after(h, lines, 12)]
    m = next((m for text in window if (m := _PARAM_INDICES.search(text))), None)
    if not m:
        return Detail()
    indices = [int(i) for i in m.group(2).split()]
    return Detail(evidence={"rank": int(m.group(1)), "parameter_indices": indices[:50]},
                  summary=f"{len(indices)} parameter(s) got no gradient on rank {m.group(1)}")


_KEYS = re.compile(r"(Missing|Unexpected) key\(s\) in state_dict: \"([^\"]+)\"")
_SIZE_MISMATCH = re.compile(r"size mismatch for ([\w.]+): copying a param with shape torch\.Size\(\[([\d, ]*)\]\) "
                            r"from checkpoint, the shape in current model is torch\.Size\(\[([\d, ]*)\]\)")


def parse_state_dict(hits: list[Hit], lines: Sequence[Line]) -> Detail:
    m = first_group(hits, _SIZE_MISMATCH)
    if m:
        return Detail(evidence={"parameter": m.group(1), "checkpoint_shape": m.group(2), "model_shape": m.group(3)},
                      summary=f"{m.group(1)}: checkpoint [{m.group(2)}] vs model [{m.group(3)}]")
    keys = [m for h in hits if (m := _KEYS.search(h.line.text))]
    if not keys:
        return Detail()
    evidence = {"kind": keys[0].group(1).lower(), "first_key": keys[0].group(2)}
    prefixed = next((m.group(2) for m in keys if m.group(2).startswith(("module.", "_orig_mod."))), None)
    if prefixed is None:
        return Detail(evidence=evidence, summary=f"{evidence['kind']} {evidence['first_key']}")
    prefix = prefixed.split(".")[0] + "."
    wrapper = "DistributedDataParallel/DataParallel" if prefix == "module." else "torch.compile"
    return Detail(evidence=dict(evidence, prefix=prefix), summary=f"keys differ by the {prefix!r} prefix",
                  causes=(f"the keys carry the {prefix!r} prefix that {wrapper} adds: the state dict was saved "
                          "from the wrapped model and loaded into the bare one (or the reverse)",),
                  fixes=(f"strip or add the prefix ({{k.removeprefix({prefix!r}): v for k, v in sd.items()}}), or "
                         "save the unwrapped model's state_dict()",))
