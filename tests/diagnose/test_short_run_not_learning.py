"""'Not learning' judged against the run's noise and length (`diagnose.verdicts.underfitting`).

A 125-step LoRA fine-tune logged 12 losses, 3.26 -> 3.02 (-8.5%), and was called "underfitting: the loss never
came down ... the model is not learning" at warning. Its fall was 3.4x its record-to-record noise: a short
fine-tune's loss falls little, and 12 records cannot tell a slow start from no learning, so it is info. A short
curve that stays within its noise, and a long one that falls a few percent, are still 'not learning'."""

from __future__ import annotations

import json
import random
from pathlib import Path

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers import read_any


def _state(path: Path, losses: list[float], every: int = 10) -> Path:
    hist = [{"epoch": round((i + 1) * every / 125, 2), "grad_norm": 0.6, "learning_rate": 2e-4,
             "loss": round(v, 4), "step": (i + 1) * every} for i, v in enumerate(losses)]
    path.write_text(json.dumps({"global_step": every * len(losses), "max_steps": 125, "logging_steps": every,
                                "log_history": hist}))
    return path


def _underfitting(path: Path) -> list:
    (run,) = read_any(path)
    return [f for f in diagnose_run(run).findings if f.type == "underfitting"]


def _noisy(start: float, fall: float, n: int, sd: float, seed: int = 3) -> list[float]:
    rnd = random.Random(seed)
    return [start - fall * i / (n - 1) + rnd.gauss(0, sd) for i in range(n)]


def test_a_short_finetune_falling_beyond_its_noise_is_not_called_not_learning(tmp_path: Path) -> None:
    fs = _underfitting(_state(tmp_path / "trainer_state.json", _noisy(3.26, 0.28, 12, 0.03)))
    assert fs and all(f.severity == "info" for f in fs), fs
    assert "too short" in fs[0].message


def test_a_short_curve_flat_within_its_noise_is_still_not_learning(tmp_path: Path) -> None:
    fs = _underfitting(_state(tmp_path / "trainer_state.json", _noisy(3.26, 0.0, 12, 0.03)))
    assert any(f.severity == "warning" for f in fs), fs


def test_a_long_run_falling_a_few_percent_is_still_not_learning(tmp_path: Path) -> None:
    fs = _underfitting(_state(tmp_path / "trainer_state.json", _noisy(3.26, 0.15, 200, 0.01)))
    assert any(f.severity == "warning" for f in fs), fs
