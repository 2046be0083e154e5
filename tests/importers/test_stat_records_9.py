"""StyleGAN2-ADA's and NVIDIA EDM's `stats.jsonl`: every value a `{num, mean, std}` summary, the step the
kimg (wild-logs-3's R2: "80 lines without a step key")."""

from __future__ import annotations

import json

import pytest

from stethoscope.importers import read_any
from stethoscope.records import LOSS
from tests.importers.series import series


def _stat(mean: float, num: int = 1, std: float = 0.0) -> dict[str, float]:
    return {"num": num, "mean": mean, "std": std}


def _stylegan(ticks: int, kimg_per_tick: float = 4.0) -> str:
    lines = []
    for t in range(ticks):
        kimg = 0.032 + kimg_per_tick * t
        lines.append({"Loss/scores/fake": _stat(-3.1 + t / 10, 64, 1.1), "Loss/G/loss": _stat(3.48 - t / 10, 32, 0.89),
                      "Loss/D/loss": _stat(0.166 + t / 100, 32, 0.23), "Loss/r1_penalty": _stat(1.72, 32, 0.5),
                      "Progress/tick": _stat(t), "Progress/kimg": _stat(kimg), "Timing/sec_per_tick": _stat(19.3),
                      "Resources/peak_gpu_mem_gb": _stat(13.77), "timestamp": 1663504868.0 + 20 * t})
    return "\n".join(json.dumps(line) for line in lines) + "\n"


def test_stylegans_stats_are_read_at_their_kimg_each_value_its_mean(write) -> None:
    (run,) = read_any(write("stats.jsonl", _stylegan(6)))
    assert run.format == "jsonl"
    assert series(run, "loss_g") == pytest.approx({0: 3.48, 4: 3.38, 8: 3.28, 12: 3.18, 16: 3.08, 20: 2.98})
    assert series(run, "loss_d")[8] == pytest.approx(0.186)
    assert series(run, "Progress/tick")[20] == 5
    assert LOSS not in {p.name for p in run.points}  # a GAN's two losses are no one train loss


def test_edms_loss_is_the_train_loss(write) -> None:
    lines = [json.dumps({"Loss/loss": _stat(0.9 - t / 20, 256, 0.3), "Progress/tick": _stat(t),
                         "Progress/kimg": _stat(50.0 * t + 0.5), "timestamp": 1.7e9 + t}) for t in range(5)]
    (run,) = read_any(write("stats.jsonl", "\n".join(lines) + "\n"))
    assert series(run, LOSS) == pytest.approx({0: 0.9, 50: 0.85, 100: 0.8, 150: 0.75, 200: 0.7})


def test_a_dict_of_other_keys_is_still_flattened_and_a_step_key_wins(write) -> None:
    lines = [json.dumps({"step": 10 * s, "loss": {"mean": 2.0 - s / 10, "max": 3.0}, "Progress/kimg": _stat(s * 4.0)})
             for s in range(1, 5)]
    (run,) = read_any(write("metrics.jsonl", "\n".join(lines) + "\n"))
    assert sorted(series(run, "loss/max")) == [10, 20, 30, 40]
