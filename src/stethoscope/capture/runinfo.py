"""Run metadata written once into the `run` table: code version, host, software, launch."""

from __future__ import annotations

import dataclasses
import os
import platform
import socket
import subprocess
import sys
import time
from typing import Any


def describe_config(config: Any) -> Any:
    """A JSON-able form of a config: dict, dataclass, argparse Namespace, or anything with vars()."""
    if config is None or isinstance(config, (dict, list, str, int, float, bool)):
        return config
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return dataclasses.asdict(config)
    if hasattr(config, "to_dict"):
        return config.to_dict()
    try:
        return dict(vars(config))
    except TypeError:
        return repr(config)


def git_state(cwd: str | None = None) -> dict[str, Any]:
    """Commit and dirty flag of the repository the run was started from (empty outside one)."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=3)
        if commit.returncode != 0:
            return {}
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                                capture_output=True, text=True, timeout=3)
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"git_commit": commit.stdout.strip(), "git_dirty": bool(status.stdout.strip())}


def software_versions() -> dict[str, Any]:
    out: dict[str, Any] = {"python": platform.python_version()}
    torch = sys.modules.get("torch")
    if torch is not None:
        out["torch"] = torch.__version__
        out["cuda"] = torch.version.cuda
        out["cuda_available"] = bool(torch.cuda.is_available())
    from stethoscope import __version__

    out["stethoscope"] = __version__
    return out


def start_info(rank: int, world_size: int, config: Any) -> dict[str, Any]:
    info: dict[str, Any] = {
        "config": describe_config(config), "argv": list(sys.argv), "host": socket.gethostname(),
        "pid": os.getpid(), "cwd": os.getcwd(), "rank": rank, "world_size": world_size,
        "start_time": time.time(), "platform": platform.platform(), "status": "running",
    }
    info.update(software_versions())
    info.update(git_state())
    return info
