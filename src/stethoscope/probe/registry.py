"""Where live probe servers can be found: a 0600 file per process in the user's live directory, and one
per rank in the run directory. Each holds the address and the token; nothing else ever shows the token."""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from stethoscope.config import env_live_dir

log = logging.getLogger(__name__)
_warned: set[Path] = set()  # directories already warned about, once per process

PROBE_FILE_FORMAT = "probe-rank-{rank:05d}.json"
PROBE_FILE_GLOB = "probe-rank-*.json"


@dataclass
class Entry:
    """One live process: where its probe server listens and the token it wants."""

    pid: int
    host: str
    port: int
    token: str
    rank: int = 0
    world_size: int = 1
    run_dir: str = ""
    started: float = 0.0
    argv: str = ""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def public(self) -> dict[str, Any]:
        """Everything but the token."""
        d = asdict(self)
        d.pop("token")
        return d


def live_dir() -> Path:
    return Path(env_live_dir())


def write_private(path: Path, data: dict[str, Any]) -> None:
    """Write JSON readable by this user only (0600 from creation: never briefly world-readable)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def register(entry: Entry) -> list[Path]:
    """Write the entry to the live directory (0700) and the run directory; returns the files written.
    A place that cannot be written (a read-only home) is skipped: the server runs, found by the other."""
    d = live_dir()
    paths = [d / f"{entry.pid}-{entry.port}.json"]
    if entry.run_dir and Path(entry.run_dir).is_dir():
        paths.append(Path(entry.run_dir) / PROBE_FILE_FORMAT.format(rank=entry.rank))
    written = []
    for p in paths:
        try:
            if p.parent == d:
                d.mkdir(parents=True, exist_ok=True)
                os.chmod(d, 0o700)
            write_private(p, asdict(entry))
        except OSError as exc:
            if p.parent in _warned:
                continue
            _warned.add(p.parent)
            log.warning("stethoscope: could not register the probe server in %s (%s)", p.parent, exc.strerror or exc)
            continue
        written.append(p)
    return written


def unregister(paths: list[Path]) -> None:
    for p in paths:
        try:
            p.unlink(missing_ok=True)
        except OSError:
            pass


def read_entry(path: Path) -> Entry | None:
    try:
        data = json.loads(path.read_text())
        return Entry(**{k: data[k] for k in Entry.__dataclass_fields__ if k in data})
    except (OSError, ValueError, TypeError, KeyError):
        return None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def live_entries(prune: bool = True) -> list[Entry]:
    """Every registered process still alive (files of dead ones are removed when `prune`)."""
    out = []
    d = live_dir()
    for p in sorted(d.glob("*.json")) if d.is_dir() else []:
        e = read_entry(p)
        if e is not None and alive(e.pid):
            out.append(e)
        elif prune:
            unregister([p])
    return sorted(out, key=lambda e: (e.run_dir, e.rank, e.pid))


def by_pid(pid: int) -> list[Entry]:
    return [e for e in live_entries(prune=False) if e.pid == pid]


def run_entries(run_dir: str | os.PathLike[str]) -> list[Entry]:
    """The rank files of a run directory, live or not (a dead rank's file stays until its Monitor closes)."""
    out = [e for p in sorted(Path(run_dir).glob(PROBE_FILE_GLOB)) if (e := read_entry(p)) is not None]
    return sorted(out, key=lambda e: e.rank)


def uptime(e: Entry) -> float:
    return max(0.0, time.time() - e.started) if e.started else 0.0
