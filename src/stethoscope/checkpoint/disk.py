"""The checkpoint folder on disk: atomic writes, the catalogue of what is there, safe deletion.

Layout: `DIR/step-00000500/{model,optimizer,...}.pt + manifest.json`. A save writes into
`DIR/.tmp-step-…` (`stage`), fsyncs every file and the folder, then renames it into place and fsyncs
DIR (`commit`, which the manager runs on a thread by default): a kill, or a crash of the machine, at any
moment leaves either the old set of checkpoints or the old set plus the new one, never a half-written
`step-*` folder. Deletion renames to `.del-…` first, so a kill mid-delete leaves no
half-deleted checkpoint that looks like a corrupt one.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stethoscope.checkpoint import manifest as mf

_STEP_DIR = re.compile(r"^step-(\d+)$")
_SUPERSEDED_DIR = re.compile(r"^superseded-step-(\d+)-\d+$")  # set aside by a rollback (manager.rollback)
USABLE = frozenset({"ok", "unverified"})
"""Statuses of a checkpoint that can be resumed from (an unverified one is verified before it is loaded)."""


@dataclass
class CheckpointInfo:
    """One checkpoint folder as listed (manifest read) or verified (every hash checked)."""

    step: int
    path: Path
    status: str
    """ok (every hash checked), unverified (manifest and file sizes checked, not the hashes), corrupt, or
    partial (half-written)."""
    reason: str | None = None
    bytes: int = 0
    time: float | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    milestone: bool = False
    files: dict[str, Any] = field(default_factory=dict)
    verified: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "path": str(self.path), "status": self.status, "reason": self.reason,
                "bytes": self.bytes, "time": self.time, "metrics": self.metrics, "milestone": self.milestone,
                "verified": self.verified}


def step_dir(root: Path, step: int) -> Path:
    return root / f"step-{step:08d}"


def step_of(path: Path) -> int | None:
    """The step a checkpoint folder's name carries (`step-N`, or `superseded-step-N-…` after a
    rollback), or None when the name carries none."""
    m = _STEP_DIR.match(path.name) or _SUPERSEDED_DIR.match(path.name)
    return int(m.group(1)) if m else None


@dataclass
class Staged:
    """A checkpoint serialised into its temporary folder, not yet hashed, durable nor published."""

    tmp: Path
    final: Path
    step: int
    meta: dict[str, Any]
    algo: str
    syncer: ThreadPoolExecutor | None = None
    files: dict[str, Future[dict[str, Any]]] = field(default_factory=dict)
    """File name → its hashes, computed (then the file fsynced) on the `syncer` thread while the next file
    is written; without a syncer, `commit` does both."""


def write_checkpoint(root: Path, step: int, parts: dict[str, Any], meta: dict[str, Any], algo: str) -> Path:
    """Write `parts` (name → object for torch.save) atomically as the checkpoint of `step`."""
    return commit(stage(root, step, parts, meta, algo, overlap=True))


def stage(root: Path, step: int, parts: dict[str, Any], meta: dict[str, Any], algo: str,
          overlap: bool = False) -> Staged:
    """Serialise every part into a temporary folder: the bytes are in the page cache, nothing is hashed
    nor visible yet. With `overlap`, each file is read back from the page cache, hashed and fsynced on a
    thread as soon as it is closed, while the next one is written. `commit` must follow."""
    import torch

    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".tmp-step-{step:08d}-{os.getpid()}-{time.monotonic_ns()}"
    tmp.mkdir()
    staged = Staged(tmp, step_dir(root, step), step, {**meta, "step": step, "time": time.time()}, algo)
    if overlap:
        staged.syncer = ThreadPoolExecutor(1, thread_name_prefix="stethoscope-fsync")
    try:
        with _without_zip_crc(torch):
            for name, obj in parts.items():
                path = tmp / f"{name}.pt"
                torch.save(obj, str(path))  # a path: torch's own C++ writer, no Python file object in the loop
                if staged.syncer is not None:
                    staged.files[path.name] = staged.syncer.submit(_hash_and_sync, path, algo)
    except BaseException:
        if staged.syncer is not None:
            staged.syncer.shutdown()  # waits: nothing still holds the folder open when it goes
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return staged


@contextmanager
def _without_zip_crc(torch: Any) -> Iterator[None]:
    """torch.save computes a CRC-32 of every zip record: half the time of a save (240 MiB: 0.24 s without,
    0.50 s with). The manifest's hashes check every byte instead, so our saves skip it; torch.load reads
    such files all the same. torch keeps the switch (`set_crc32_options`) per thread: it is turned off on
    the thread that saves and put back as it was on that same thread, whatever other threads save at the
    same time (a process-wide count once restored it on the wrong thread and left the user's thread off)."""
    before = torch.serialization.get_crc32_options()
    torch.serialization.set_crc32_options(False)
    try:
        yield
    finally:
        torch.serialization.set_crc32_options(before)


def commit(staged: Staged) -> Path:
    """Hash what `stage` wrote (unless its thread did), write the manifest, make it all durable (fsync every
    file and the folder) and only then publish it (rename into place, fsync the parent): until then a
    crash, even of the machine, leaves it out of the catalogue."""
    try:
        files = {}
        for path in sorted(staged.tmp.iterdir()):
            started = staged.files.get(path.name)
            files[path.name] = started.result() if started is not None else _hash_and_sync(path, staged.algo)
    finally:
        if staged.syncer is not None:
            staged.syncer.shutdown()
    mf.write_manifest(staged.tmp, files, staged.algo, staged.meta)
    fsync_path(staged.tmp)
    if staged.final.exists():  # the same step saved again (after a rollback): the new one replaces it
        _discard(staged.final)
    os.rename(staged.tmp, staged.final)
    fsync_path(staged.final.parent)
    return staged.final


def _hash_and_sync(path: Path, algo: str) -> dict[str, Any]:
    out = mf.hash_file(path, algo)
    fsync_path(path)
    return out


def fsync_path(path: Path) -> None:
    """fsync a file or a folder (its entries) by path."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def delete_checkpoint(path: Path) -> None:
    _discard(path)


def retire(path: Path) -> Path:
    """Take a checkpoint out of the catalogue at once (a rename); the caller removes the files later."""
    trash = path.with_name(f".del-{path.name}-{time.monotonic_ns()}")
    os.rename(path, trash)
    return trash


def _discard(path: Path) -> None:
    trash = retire(path)
    fsync_path(path.parent)
    shutil.rmtree(trash, ignore_errors=True)


def sweep_leftovers(root: Path) -> list[Path]:
    """Remove temporary and half-deleted folders that a killed process left behind (not ours)."""
    gone = []
    for p in root.glob(".tmp-step-*") if root.is_dir() else ():
        if f"-{os.getpid()}-" not in p.name:
            shutil.rmtree(p, ignore_errors=True)
            gone.append(p)
    for p in root.glob(".del-*") if root.is_dir() else ():
        shutil.rmtree(p, ignore_errors=True)
    return gone


def catalogue(root: Path, check_hashes: bool = False) -> list[CheckpointInfo]:
    """Every checkpoint folder under `root`, oldest first; half-written temporaries as `partial`."""
    out = []
    if not root.is_dir():
        return out
    for p in root.iterdir():
        m = _STEP_DIR.match(p.name)
        if m and p.is_dir():
            out.append(describe(p, int(m.group(1)), check_hashes))
        elif p.name.startswith(".tmp-step-") and p.is_dir():
            step = int(p.name.split("-")[2]) if p.name.split("-")[2].isdigit() else -1
            out.append(CheckpointInfo(step, p, "partial", "half-written (a save that never finished)"))
    return sorted(out, key=lambda i: (i.step, i.status != "partial"))


def describe(path: Path, step: int | None, check_hashes: bool) -> CheckpointInfo:
    """One checkpoint folder: with `check_hashes` every hash (`ok` or corrupt), else the manifest and
    the file sizes (`unverified` or corrupt). `step` None: the manifest's step (a folder not named by it)."""
    if check_hashes:
        body, why = mf.verify(path)
    else:
        try:
            body = mf.read_manifest(path)
            why = mf.check_sizes(path, body)
        except ValueError as exc:
            body, why = None, str(exc)
    if body is None:
        return CheckpointInfo(-1 if step is None else step, path, "corrupt", why, bytes=_du(path))
    said = body.get("step")
    if step is None:
        step = said if isinstance(said, int) else -1
    info = CheckpointInfo(step, path, "corrupt" if why else "ok" if check_hashes else "unverified", why,
                          sum(f["bytes"] for f in body["files"].values()), body.get("time"),
                          body.get("metrics") or {}, bool(body.get("milestone")), body["files"], verified=check_hashes)
    if said != step:
        info.status, info.reason = "corrupt", f"manifest says step {said}, the folder says {step}"
    elif _SUPERSEDED_DIR.match(path.name) and not why:
        info.reason = "superseded: set aside by a rollback (kept, never resumed from)"
    return info


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
