from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def realruns_dir() -> Path | None:
    """The labelled real runs beside the repository (../shared/realruns), or $STETHOSCOPE_REALRUNS."""
    env = os.environ.get("STETHOSCOPE_REALRUNS")
    for cand in ([Path(env)] if env else []) + [REPO.parent / "shared" / "realruns"]:
        if (cand / "labels.json").is_file():
            return cand
    return None


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread() -> None:
    # Two threads on this shared 2-core machine turn a 45 ms step into 0.3–2 s.
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(1)


@pytest.fixture(autouse=True, scope="session")
def _private_live_registry(tmp_path_factory) -> None:
    # Every Monitor registers its probe server; the suite's go to a scratch directory, not ~/.cache.
    os.environ.setdefault("STETHOSCOPE_LIVE_DIR", str(tmp_path_factory.mktemp("live-registry")))


@pytest.fixture(autouse=True)
def _no_leaks() -> None:
    env = dict(os.environ)
    before = {t.ident for t in threading.enumerate()}
    yield
    os.environ.clear()
    os.environ.update(env)
    leaked = [t.name for t in threading.enumerate() if t.ident not in before and t.name.startswith("stethoscope")]
    assert not leaked, f"stethoscope threads left running after the test: {leaked}"


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """Environment for running the CLI in a subprocess."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env["STETHOSCOPE_RUNS"] = str(tmp_path)
    return env


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120, stdin: str | None = None):
    import subprocess

    return subprocess.run([sys.executable, "-m", "stethoscope.cli.main", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, input=stdin)
