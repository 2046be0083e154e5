"""A slow climb right after an off-schedule LR jump (x50) is that jump's divergence: found (the bar is half the
usual rise when the jump came after the best level's records), dated where the loss left its best level (not where
its level cleared the bar), with the jump named and counted from there, and no fp16 guess where nothing says fp16."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.findings.catalogue import DIVERGENCE
from stethoscope.importers import read_any


def _log(tmp_path: Path, steps: int, climb: float = 0.6, jump: bool = True) -> Path:
    rng = random.Random(0)
    lines = []
    for s in range(steps):
        loss = 2.3 + 0.7 * math.exp(-s / 30) + rng.gauss(0, 0.01)
        if s >= 104:
            loss += climb * (1 - math.exp(-(s - 104) / 30))
        lr = 5e-2 if jump and s >= 100 else 1e-3
        lines.append(f"step {s} | loss {loss:.4f} | lr {lr:g}")
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def _divergence(path: Path):
    (run,) = read_any(path)
    found = [f for f in diagnose_run(run).findings if f.type == DIVERGENCE and f.severity in ("warning", "error")]
    return found[0] if found else None


@pytest.mark.parametrize("steps", [200, 300])
def test_a_climb_after_an_lr_jump_is_its_divergence_dated_where_it_began(tmp_path: Path, steps: int) -> None:
    f = _divergence(_log(tmp_path, steps))
    assert f is not None
    assert 100 <= f.step <= 112  # the climb began at 104; its level cleared the bar at ~124
    assert f.causes[0].startswith("LR jumped 0.001 -> 0.05 (x50) at step 100")
    assert f"{f.step - 100} step" in f.causes[0]  # counted from the finding's step, not the detection's
    assert not any("fp16" in c for c in f.causes)


def test_the_same_climb_without_a_jump_is_held_to_the_usual_bar(tmp_path: Path) -> None:
    # +10% with no cause in the log: inside the 20% bar, not a divergence
    assert _divergence(_log(tmp_path, 300, climb=0.25, jump=False)) is None
