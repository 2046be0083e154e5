"""A generalization gap (`diagnose.generalization`): the train loss fell a lot, the eval loss hardly moved.

DETR on a small custom set: test loss about 55 -> 50 over ten epochs, train loss 49 -> 26, AP 0.000; the run was
called "healthy, converged". A large, sustained gap is an `overfitting` warning (not generalizing); an eval loss
that follows the train loss, or one that sits higher but falls with it, is not."""

from __future__ import annotations

import json
import random
from pathlib import Path

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers import read_any


def _state(path: Path, eval_of: object, steps: int = 1000, every: int = 10, eval_every: int = 100) -> Path:
    rnd = random.Random(0)
    hist: list[dict] = []
    for step in range(every, steps + 1, every):
        train = 2.0 - 1.0 * (1 - (1 - step / steps) ** 2) + rnd.gauss(0, 0.02)
        hist.append({"epoch": step / 100, "learning_rate": 1e-4, "loss": round(train, 4), "step": step})
        if step % eval_every == 0:
            hist.append({"epoch": step / 100, "eval_loss": round(eval_of(step, train) + rnd.gauss(0, 0.01), 4),
                         "step": step})
    path.write_text(json.dumps({"global_step": steps, "max_steps": steps, "log_history": hist}))
    return path


def _overfitting(path: Path) -> list:
    (run,) = read_any(path)
    return [f for f in diagnose_run(run).findings if f.type == "overfitting" and f.severity != "info"]


def test_an_eval_loss_flat_while_the_train_loss_halves_is_a_warning(tmp_path: Path) -> None:
    (f,) = _overfitting(_state(tmp_path / "trainer_state.json", lambda step, train: 2.2 - 0.1 * step / 1000))
    assert f.severity == "warning" and "not generalizing" in f.message, f


def test_an_eval_loss_that_follows_the_train_loss_is_fine(tmp_path: Path) -> None:
    assert _overfitting(_state(tmp_path / "trainer_state.json", lambda step, train: train + 0.05)) == []


def test_an_eval_loss_higher_but_falling_with_the_train_loss_is_fine(tmp_path: Path) -> None:
    assert _overfitting(_state(tmp_path / "trainer_state.json", lambda step, train: 1.6 * train)) == []
