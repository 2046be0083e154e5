"""Storage: a full disk, and checkpoints that are truncated, refused by torch.load or do not fit the model."""

from __future__ import annotations

import re
from collections.abc import Sequence

from stethoscope.explain.model import Detail, Hit, Line, Signature, first_group, lines_after, rx
from stethoscope.findings.catalogue import CRASH


# -- parsers ------------------------------------------------------------------------------------

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


# -- signatures ---------------------------------------------------------------------------------

DISK_FULL = Signature(
    "disk_full", rx(r"No space left on device", r"\[Errno 28\]", r"Disk quota exceeded", r"\[Errno 122\]"),
    CRASH, "error", "Disk full",
    ("checkpoints accumulating without retention, or caches (HF datasets/hub, TMPDIR, torch compile) on "
     "a small filesystem",),
    ("free space and keep only the last N checkpoints",
     "verify the last checkpoint is complete before resuming: a save interrupted by a full disk is "
     "truncated",
     "move caches to a large filesystem (HF_HOME, TMPDIR)"),
    parse_disk)


STATE_DICT_MISMATCH = Signature(
    "state_dict_mismatch", rx(r"size mismatch for [\w.]+: copying a param", r"Missing key\(s\) in state_dict",
                               r"Unexpected key\(s\) in state_dict"),
    CRASH, "error", "Checkpoint does not match the model",
    ("the checkpoint was saved from a different configuration (vocab resized, other hidden size or "
     "number of layers) or a differently wrapped model",),
    ("build the model with the checkpoint's config; resize embeddings before loading if tokens were "
     "added",
     "load with strict=False only after checking which keys differ"),
    parse_state_dict)


CHECKPOINT_CORRUPT = Signature(
    "checkpoint_corrupt", rx(r"PytorchStreamReader failed reading zip archive", r"failed finding central directory",
                              r"invalid load key", r"unexpected EOF, expected \d+ more bytes",
                              r"file might be corrupted", r"HeaderTooLarge", r"Error while deserializing header",
                              r"incomplete metadata, file not fully covered", r"EOFError: Ran out of input"),
    CRASH, "error", "Checkpoint file truncated or corrupt",
    ("the save was interrupted (job killed, disk full) and left a partial file",
     "an incomplete download or copy"),
    ("compare the file size/hash with what was written (a manifest); fall back to the previous checkpoint",
     "save atomically: write to a temporary name, fsync, then rename",
     "check free disk space where checkpoints are written"),
    parse_corrupt)


WEIGHTS_ONLY_LOAD = Signature(
    "weights_only_load", rx(r"Weights only load failed", r"WeightsUnpickler error"),
    CRASH, "error", "torch.load refused the checkpoint (weights_only)",
    ("since PyTorch 2.6 torch.load defaults to weights_only=True and the file pickles Python objects "
     "(argparse.Namespace, numpy scalars, custom classes) besides tensors",),
    ("save plain state dicts (tensors, numbers, strings) instead of pickled objects",
     "for files you trust: allowlist the named globals with torch.serialization.add_safe_globals or the "
     "safe_globals context manager",
     "weights_only=False only for checkpoints you created yourself: it can run arbitrary code"),
    parse_weights_only)
