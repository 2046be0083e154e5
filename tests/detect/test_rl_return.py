"""An RL agent's loss that rises while its episode return rises (`detect.overfit_quality._RETURN`).

A DQN's TD loss (or any value loss) is no descending loss: its targets grow with the returns it predicts. SB3's
DQN on Breakout (wild-logs-4): the loss rose 0.019 -> 0.06 while rollout/ep_rew_mean rose 1.9 -> 5.8, and that was
an ERROR divergence. It is the objective's rise (info, naming the return); the same rise while the return falls
stays a divergence."""

from __future__ import annotations

import pytest

from stethoscope.detect.overfit_quality import _RETURN
from stethoscope.detect.registry import DetectorSet
from stethoscope.findings.catalogue import DIVERGENCE
from stethoscope.records import LOSS, StepRecord

from .conftest import of_type, replay

# the SB3 console tables, in order (one a rollout; the first has no train/ part)
_LOSS = [None, 0.019, 0.0215, 0.0243, 0.0217, 0.0269, 0.0292, 0.0323, 0.0288, 0.022, 0.0265, 0.0234, 0.0329, 0.0336,
         0.0369, 0.0401, 0.0393, 0.0542, 0.0393, 0.0361, 0.057, 0.0384, 0.0419, 0.0505, 0.0414, 0.0435, 0.0381, 0.0567,
         0.0575, 0.0541, 0.041, 0.0441, 0.0425, 0.0485, 0.0601, 0.0484, 0.0449, 0.0398, 0.0446, 0.0442, 0.0498, 0.0382,
         0.0529, 0.0526, 0.0528]
_RETURNS = [1.9, 1.91, 1.68, 1.78, 1.73, 1.85, 1.78, 1.89, 1.7, 2.05, 2.07, 2.24, 2.4, 1.99, 2.47, 2.12, 2.66, 3.0, 2.96,
            3.13, 3.09, 3.28, 3.67, 3.84, 3.83, 4.99, 4.72, 5.14, 5.78, 5.63, 5.22, 5.2, 5.91, 5.82, 5.36, 5.99, 5.03,
            5.57, 4.88, 5.23, 5.12, 5.61, 5.33, 5.84, 5.25]


def _divergence(returns: list[float]) -> list:
    records = []
    for i, (loss, ret) in enumerate(zip(_LOSS, returns)):
        values = {"rollout/ep_rew_mean": ret}
        if loss is not None:
            values[LOSS] = loss
        records.append(StepRecord(8000 * (i + 1), values))
    return of_type(replay(DetectorSet(strict=True), records), DIVERGENCE)


def test_a_td_loss_that_rose_with_the_agents_return_is_the_objectives_rise() -> None:
    found = _divergence(_RETURNS)
    assert found and all(f.severity == "info" for f in found), [(f.severity, f.message) for f in found]
    assert found[-1].evidence["improving_metric"]["name"] == "rollout/ep_rew_mean"


def test_the_same_rise_while_the_return_fell_is_still_a_divergence() -> None:
    found = _divergence(list(reversed(_RETURNS)))
    assert [f.severity for f in found if f.severity != "info"] == ["error"], [(f.severity, f.message) for f in found]


@pytest.mark.parametrize(("name", "is_return"), [
    ("rollout/ep_rew_mean", True), ("eval/mean_reward", True), ("charts/episodic_return", True),
    ("episode_reward_mean", True), ("train/value_loss", False), ("train/reward_loss", False), ("eval/loss", False)])
def test_what_counts_as_an_episode_return(name: str, is_return: bool) -> None:
    assert bool(_RETURN.search(name)) is is_return
