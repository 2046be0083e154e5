from __future__ import annotations

import math
from pathlib import Path

import pytest

import stethoscope as st

STEPS = 40


def loss_at(step: int) -> float:
    """A falling loss that turns NaN at step 30 (so the detectors raise a finding)."""
    return float("nan") if step >= 30 else 4.0 * math.exp(-step / 20) + 1.0 + 0.01 * (step % 3)


def record(run_dir: Path, rank: int = 0, world_size: int = 1, **monitor) -> st.Monitor:
    """A short real run: loss, grad norm, LR and one eval, recorded by a Monitor."""
    mon = st.Monitor(run_dir, rank=rank, world_size=world_size, flush_interval=0.2, **monitor)
    for step in range(STEPS):
        mon.step(step, loss=loss_at(step) + rank, grad_norm=1.0 + 0.1 * (step % 5), **{"opt/lr": 1e-3 * (1 - step / STEPS)})
        if step == 20:
            mon.eval(step, eval_loss=2.5)
    return mon


@pytest.fixture
def recorded(tmp_path) -> Path:
    """A finished two-rank run in tmp_path/exp1."""
    for rank in (0, 1):
        record(tmp_path / "exp1", rank=rank, world_size=2, resume=rank > 0).close()
    return tmp_path / "exp1"


def store_series(run_dir: Path, rank: int = 0) -> dict[str, dict[int, float]]:
    from stethoscope.store.query import open_run

    with open_run(run_dir) as run:
        _, rows = run.query("SELECT name, step, value FROM metrics WHERE rank = ?", (rank,))
    out: dict[str, dict[int, float]] = {}
    for name, step, value in rows:
        out.setdefault(name, {})[step] = float("nan") if value is None else value
    return out


def same(a: float, b: float, rel: float = 1e-6) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=rel, abs=1e-12)


def cli(*args: str, env: dict[str, str] | None = None):
    """The `stethoscope` command run in this process (the exporters' tools stay imported between tests)."""
    from click.testing import CliRunner

    from stethoscope.cli.main import cli as command

    return CliRunner().invoke(command, list(args), env=env, catch_exceptions=False)
