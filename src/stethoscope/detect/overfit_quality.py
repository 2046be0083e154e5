"""An eval loss that rises while the eval's own quality metric keeps improving.

A classifier or detector grows overconfident late in training: the held-out loss (cross-entropy, a box
loss) creeps up while its accuracy, mAP or F1 still improves. The model is not getting worse on the data the
user judges it by, so the rise is no overfitting to act on; `OverfitDetector` then reports it as `info` and
names the metric. Only metrics where higher is better and that judge predictions as a whole count
(accuracy, mAP, F1, BLEU, ROUGE, AUC, IoU, Dice, exact match; not precision or recall alone, which trade),
and an RL agent's mean episode return.
"""

from __future__ import annotations

import math
import re
from typing import Any

_QUALITY = re.compile(r"^(?:eval|metrics|val|valid|validation|test)/(?:\w+?[_/])*"
                      r"(?:acc|accuracy|top1|top5|acc1|acc5|m_?ap(?:_?50|50-95|_0\.5|_0\.5:0\.95)?|f1|bleu|"
                      r"rouge\w*|auc|auroc|iou|miou|dice|exact_match|em)(?:\([a-z]\))?$", re.IGNORECASE)
# an RL agent's mean episode return, higher is better (SB3 rollout/ep_rew_mean and eval/mean_reward, CleanRL
# charts/episodic_return, RLlib episode_reward_mean): its losses are no descending losses (a value or TD loss grows
# with the returns it predicts), so a loss that rose while the return rose is the objective's rise as well
_RETURN = re.compile(r"(?:^|/)(?:ep_rew_mean|mean_reward|episode_reward(?:_mean)?|episodic_return|ep_ret(?:urn)?_mean|"
                     r"mean_episode_(?:reward|return)|episode_return(?:_mean)?)$", re.IGNORECASE)
_KEPT = 256  # evals of each metric kept
_GAIN_REL = 0.005  # an improvement of at least this share of the metric's earlier best
_RISE_REL = 0.5  # with no eval before a rise, the metric must climb by half its first value since (not noise)
_RETURN_GAIN = 0.2  # an episode return's level must rise by a fifth (its rollouts are noisy)


class HeldOutQuality:
    """The quality metrics a run logs at its evals, kept to tell overconfidence from overfitting."""

    def __init__(self) -> None:
        self.series: dict[str, list[list[float]]] = {}  # name -> [[step, value], ...]
        self._kinds: dict[str, bool] = {}  # name -> a quality metric: one regex test per name, not per record

    def push(self, step: int, values: dict[str, float]) -> None:
        kinds, isfinite = self._kinds, math.isfinite  # every record (the writer thread), every value
        for name, value in values.items():
            if not isfinite(value):
                continue
            quality = kinds.get(name)
            if quality is None:
                quality = kinds[name] = bool(_QUALITY.match(name) or _RETURN.search(name))
            if quality:
                points = self.series.setdefault(name, [])
                points.append([step, value])
                if len(points) > _KEPT:
                    del points[0]

    def improving_since(self, step: int) -> tuple[str, float, int] | None:
        """(name, best value, its step) of a metric that is better after `step` than at or before it and is
        at its best in the last third of its evals since (still improving), else None."""
        for name, points in self.series.items():
            before = [v for s, v in points if s <= step]
            after = [(s, v) for s, v in points if s > step]
            if not before or len(after) < 2:
                continue
            best_s, best_v = max(after, key=lambda p: p[1])
            recent = after[len(after) - max(1, len(after) // 3):]
            if best_v > max(before) + _GAIN_REL * abs(max(before)) and best_s >= recent[0][0]:
                return name, best_v, int(best_s)
        return None

    def improving_through(self, start: int) -> tuple[str, float, float, int] | None:
        """(name, first, best, best's step) of a metric that kept improving from `start` on: better than any eval
        at or before `start` (or, with none before, at least `_RISE_REL` above its first eval since), at its best
        in the last third of its evals since, and never back below its first eval since. A loss that rose
        while such a metric climbed is the objective's rise (more matched predictions, a harder curriculum),
        not a model getting worse."""
        for name, points in self.series.items():
            before = [v for s, v in points if s <= start]
            after = [(s, v) for s, v in points if s > start]
            if len(after) < 3:
                continue
            if _RETURN.search(name):
                rose = _return_rose(before, [v for _, v in after])
                if rose is not None:
                    return (name, *rose, int(after[-1][0]))  # its level at the end
                continue
            first = max(before) if before else after[0][1]
            need = _GAIN_REL if before else _RISE_REL
            best_s, best_v = max(after, key=lambda p: p[1])
            recent = after[len(after) - max(1, len(after) // 3):]
            if best_v > first + need * abs(first) and best_s >= recent[0][0] and \
                    min(v for _, v in after[1:]) >= after[0][1]:
                return name, first, best_v, int(best_s)
        return None

    def state_dict(self) -> dict[str, Any]:
        return {"series": {k: [list(p) for p in v] for k, v in self.series.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.series = {k: [list(p) for p in v] for k, v in state.get("series", {}).items()}


def _return_rose(before: list[float], after: list[float]) -> tuple[float, float] | None:
    """(level before, level at the end) when an agent's mean episode return rose: the median of the last third of
    its records since the start above the median before it (or of the first third since, with none before) by
    `_RETURN_GAIN` of its size. A return is noisy from one rollout to the next, so its level counts, not every record."""
    late = sorted(after[len(after) - max(1, len(after) // 3):])
    base = sorted(before or after[: max(1, len(after) // 3)])
    lo, hi = base[len(base) // 2], late[len(late) // 2]
    return (lo, hi) if hi > lo + _RETURN_GAIN * abs(lo) and hi > lo else None
