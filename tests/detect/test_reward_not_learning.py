"""An RL agent whose return never rises over the whole run (`detect.reward`): the finding that it is not learning.

Wild RL logs (SB3 PPO on Pendulum, a CleanRL DQN) whose `ep_rew_mean` sat at its first level for the whole run
got nothing but a loss verdict: an RL loss says little about learning, so the return is what is judged."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from stethoscope.detect.reward import RewardDetector
from stethoscope.diagnose.engine import diagnose_run
from stethoscope.findings.catalogue import UNDERFITTING
from stethoscope.importers import read_any
from stethoscope.records import StepRecord


def _sb3_log(path: Path, returns: list[float]) -> Path:
    """Stable-Baselines3's console: one box per rollout (PPO on Pendulum-v1), `train/` from the second on."""
    rnd = random.Random(0)
    out = ["Using cpu device", "Wrapping the env with a `Monitor` wrapper", "Wrapping the env in a DummyVecEnv."]
    for i, r in enumerate(returns, 1):
        steps = 2048 * i
        rows = [("rollout/", ""), ("   ep_len_mean", "200"), ("   ep_rew_mean", f"{r:.3g}"), ("time/", ""),
                ("   fps", f"{812 + rnd.randint(-20, 20)}"), ("   iterations", f"{i}"),
                ("   time_elapsed", f"{int(steps / 800)}"), ("   total_timesteps", f"{steps}")]
        if i > 1:
            rows += [("train/", ""), ("   approx_kl", f"{0.004 + rnd.random() * 0.004:.3g}"),
                     ("   entropy_loss", f"{-1.41 + i * 0.001:.3g}"), ("   learning_rate", "0.0003"),
                     ("   loss", f"{20 + rnd.random() * 30:.3g}"), ("   n_updates", f"{10 * (i - 1)}"),
                     ("   value_loss", f"{60 + rnd.random() * 40:.3g}")]
        out.append("-" * 41)
        out += [f"| {k:<24}| {v:<12}|" for k, v in rows]
        out.append("-" * 41)
    path.write_text("\n".join(out) + "\n")
    return path


def _not_learning(path: Path) -> list:
    (run,) = read_any(path)
    return [f for f in diagnose_run(run).findings if f.type == UNDERFITTING and f.source == "reward"]


def _returns(n: int, level, noise: float = 60.0, seed: int = 5) -> list[float]:
    rnd = random.Random(seed)
    return [level(i) + rnd.gauss(0, noise) for i in range(n)]


def test_a_long_run_whose_return_stays_flat_is_a_warning(tmp_path: Path) -> None:
    (f,) = _not_learning(_sb3_log(tmp_path / "ppo.log", _returns(60, lambda i: -1200.0)))
    assert f.severity == "warning" and f.evidence["series"] == "rollout/ep_rew_mean"
    assert "not learning" in f.message and f.step == 2048 and f.end_step == 60 * 2048


def test_a_short_flat_run_is_info_only(tmp_path: Path) -> None:
    (f,) = _not_learning(_sb3_log(tmp_path / "ppo.log", _returns(20, lambda i: -1200.0)))
    assert f.severity == "info"


def test_a_falling_return_is_named(tmp_path: Path) -> None:
    (f,) = _not_learning(_sb3_log(tmp_path / "ppo.log", _returns(60, lambda i: -1200.0 - 8 * i)))
    assert f.severity == "warning" and f.evidence["fell"] and "fell" in f.message


@pytest.mark.parametrize("level", [lambda i: -1200.0 + 900 * min(1.0, i / 40),  # learns from the start
                                   lambda i: -1200.0 + (900 * (i - 40) / 20 if i > 40 else 0.0),  # learns late
                                   lambda i: -1200.0 + 200 * i / 60])  # learns slowly: a sixth, 3 sigmas in all
def test_an_agent_that_learns_is_not_a_finding(tmp_path: Path, level) -> None:
    assert _not_learning(_sb3_log(tmp_path / "ppo.log", _returns(60, level))) == []


def _replay(series: dict[str, list[float]]) -> list:
    det = RewardDetector()
    n = len(next(iter(series.values())))
    for i in range(n):
        det.update(StepRecord(1000 * (i + 1), {k: v[i] for k, v in series.items()}))
    return det.finish()


def test_a_sparse_reward_never_found_is_a_warning() -> None:
    (f,) = _replay({"charts/episodic_return": [0.0] * 80})
    assert f.severity == "warning"


def test_a_return_at_its_cap_from_the_start_is_info_at_most() -> None:
    (f,) = _replay({"rollout/ep_rew_mean": [500.0] * 80})  # CartPole resumed at its cap
    assert f.severity == "info"


def test_preference_rewards_are_not_returns() -> None:
    assert _replay({"rewards/chosen": [0.1] * 80, "rewards/margins": [0.0] * 80}) == []
