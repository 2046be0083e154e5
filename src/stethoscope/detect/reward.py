"""An RL agent that never learned: its episode return (reward) is flat or falling over the whole run.

An RL run's loss says little about learning (a value loss grows with the returns it predicts, a policy loss
hovers around 0), so whether the agent learns is read off the return it logs: SB3's `rollout/ep_rew_mean`,
CleanRL's `charts/episodic_return`, Spinning Up's `AverageEpRet`, an RLHF run's mean reward. Judged at the
end of the log, over the whole run: the return's level (the median of a window of `_WINDOW_SHARE` of the
records) never rose above its level at the start by more than its window's noise can (`_NOISE`, and at least
`_GAIN` of its size), at any point of the run. An agent that learns late still rises before the end; one
that learned and then collapsed rose first, and is no such run.

`warning` when the run logged `_WARN_POINTS` returns or more (it had the time to learn: the budget spent on it is
lost), `info` on a shorter one (exploration can take that long). A return that never varied at all and is not 0
is `info` at most: an agent already at its task's cap (CartPole's 500) does not vary either. Preference-tuning
`rewards/chosen` and `rewards/margins` are not returns: they are read by the overfit detector's quality metrics.
"""

from __future__ import annotations

import math
import re
import statistics
from typing import Any

from stethoscope.detect.config import DetectConfig
from stethoscope.detect.overfit_quality import _RETURN
from stethoscope.findings.catalogue import PLATEAU, UNDERFITTING
from stethoscope.records import Finding, StepRecord

_MORE = re.compile(r"(?:^|/)(?:average_?ep_?ret|avg_?(?:episode_)?return|mean_?return|return_mean|reward_mean|"
                   r"mean_scores|episodic_reward|ep_reward(?:_mean)?|eprewmean)$", re.IGNORECASE)
_NOT = re.compile(r"(?:chosen|rejected|margin|accurac|std|max|min)", re.IGNORECASE)
_MIN_POINTS = 10  # returns over the run: fewer say nothing about a trend
_WARN_POINTS = 50
_WINDOW_SHARE = 0.125  # a level: the median of this share of the records (at least `_MIN_WINDOW`)
_MIN_WINDOW = 3
_GAIN = 0.05  # a rise of at least this share of the return's size (a drift of a few % is no learning)...
_NOISE = 5.0  # ...and of this many units of sigma / sqrt(window): a difference of two window medians (each
# ~1.25 sigma / sqrt(window)) the noise makes with 1/1000 odds; a fixed share alone (a fifth) called a Pendulum
# agent that learned -1200 -> -1000 "not learning": a return's offset is no scale
_KEPT = 4096
_REMEDIES = (
    ("a reward the agent cannot reach by chance (sparse: exploration never finds it)",
     "check the reward on a hand-played or scripted episode; shape it, or raise exploration (entropy coef, epsilon)"),
    ("an LR too small, or too large (the policy collapses to one action at once)",
     "try the library's default hyperparameters for the environment first (rl-zoo), then change one at a time"),
    ("observations or actions the agent cannot use (unnormalised, wrong action space, a wrapper dropping frames)",
     "log a few observations and actions; normalise observations (VecNormalize) and check the action bounds"),
)


class RewardDetector:
    """Follows an RL run's episode return; reports at `finish` a run whose return never rose."""

    name = "reward"

    def __init__(self, config: DetectConfig | None = None) -> None:
        self.series: dict[str, list[list[float]]] = {}
        self._names: dict[str, bool] = {}

    def update(self, record: StepRecord) -> list[Finding]:
        names = self._names
        for name, value in record.values.items():
            is_return = names.get(name)
            if is_return is None:
                is_return = names[name] = _is_return(name)
            if is_return and math.isfinite(value):
                points = self.series.setdefault(name, [])
                points.append([float(record.step), value])
                if len(points) > _KEPT:
                    del points[_MIN_POINTS]  # the start stays: the level is judged against it
        return []

    def finish(self) -> list[Finding]:
        for name in sorted(self.series, key=lambda n: -len(self.series[n])):  # the best-sampled return
            f = _never_rose(name, self.series[name])
            if f is not None:
                return [f]
        return []

    def state_dict(self) -> dict[str, Any]:
        return {"series": {k: [list(p) for p in v] for k, v in self.series.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.series = {k: [list(p) for p in v] for k, v in state.get("series", {}).items()}


def _is_return(name: str) -> bool:
    return bool(_RETURN.search(name) or _MORE.search(name)) and not _NOT.search(name)


def _never_rose(name: str, points: list[list[float]]) -> Finding | None:
    values = [v for _, v in points]
    n = len(values)
    if n < _MIN_POINTS:
        return None
    w = max(_MIN_WINDOW, int(n * _WINDOW_SHARE))
    levels = [statistics.median(values[i:i + w]) for i in range(0, n - w + 1)]
    start, end, best = levels[0], levels[-1], max(levels)
    diffs = [b - a for a, b in zip(values, values[1:])]
    noise = 1.4826 * statistics.median(abs(d) for d in diffs) / math.sqrt(2)  # one return's noise
    size = max(abs(start), abs(end), max(values) - min(values))
    need = max(_GAIN * abs(start), _NOISE * noise / math.sqrt(w))
    if best - start > need or (best - start > 0 and need == 0.0):
        return None
    constant = max(values) - min(values) <= 1e-9 * max(1.0, size)
    severity = "warning" if n >= _WARN_POINTS and not (constant and start != 0.0) else "info"
    fell = end < start - need
    trend = "fell" if fell else "stayed flat"
    step0, step1 = int(points[0][0]), int(points[-1][0])
    msg = (f"the agent is not learning: its return `{name}` {trend} over the whole run, {start:.4g} at the start -> "
           f"{end:.4g} at the end (the median of {w} returns; {best:.4g} at best, never {need:.3g} above the start) "
           f"over {n} records from step {step0} to {step1}")
    evidence: dict[str, Any] = {"series": name, "start_level": start, "level": end, "best_level": best,
                                "records": n, "window": w, "noise": noise, "needed_gain": need, "fell": fell,
                                "verdict": True}
    causes, fixes = zip(*_REMEDIES)
    return Finding(UNDERFITTING, severity, step0, msg, end_step=step1, evidence=evidence, source="reward",
                   symptoms=[{"type": PLATEAU, "step": step0}], causes=list(causes), fixes=list(fixes))
