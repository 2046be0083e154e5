"""A loss flat at ln(K) for the whole run is named as chance level (`diagnose.verdicts.underfitting`).

A st-gcn run sat at 1.6094 = ln 5 (top-1 20%), a DCGAN's discriminator at 1.386 = 2 ln 2: "not learning" was said
(or nothing), never "chance level". With no class count in the log, a loss within 0.3% of ln(K) for one K <= 10 at
its start, end and best is named; a flat loss at no such value is not."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers import read_any


def _flat(path: Path, level: float, n: int = 100) -> list:
    rnd = random.Random(2)
    hist = [{"epoch": i / 10, "learning_rate": 1e-3, "loss": round(level + rnd.gauss(0, 0.002), 4), "step": 10 * i}
            for i in range(1, n + 1)]
    path.write_text(json.dumps({"global_step": 10 * n, "log_history": hist}))
    (run,) = read_any(path)
    return [f for f in diagnose_run(run).findings if f.type == "underfitting" and f.severity != "info"]


def test_a_loss_flat_at_ln5_is_named_chance_level(tmp_path: Path) -> None:
    (f,) = _flat(tmp_path / "trainer_state.json", math.log(5))
    assert "chance level" in f.message and "ln(5)" in f.message, f


def test_a_discriminator_at_2ln2_is_named_with_the_gan_reading(tmp_path: Path) -> None:
    (f,) = _flat(tmp_path / "trainer_state.json", 2 * math.log(2))
    assert "ln(4)" in f.message and "GAN" in f.message, f


def test_a_flat_loss_at_no_ln_k_is_not_called_chance(tmp_path: Path) -> None:
    (f,) = _flat(tmp_path / "trainer_state.json", 1.75)
    assert "chance" not in f.message, f
