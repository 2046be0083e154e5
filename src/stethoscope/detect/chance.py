"""A classifier that never left chance level: its eval accuracy stays at 1/K at every eval and its loss at
ln(K) (the cross-entropy of a uniform guess over K classes) from its first record to its last.

A plateau at the start of a run is often the run's warm-up, and a run may learn late, so this is judged at the
end of the log, over the whole run, and needs both signs: an accuracy that never moved off 1/K (a model that
predicts one class, or noise, on a balanced eval set) and a loss that never came below ln(K). A run that
plateaus after learning is past chance on both. The frozen LoRA adapter, an LR too small to move anything
(4.6e-6 for RoBERTa), labels that do not match the inputs, a loss on detached outputs: the run burns its
budget learning nothing, so `warning`.

A binary classifier's eval ROC AUC at 0.5 (+-`_AUC_TOL`) at every eval is the same verdict without a K (the
loss of an imbalanced binary task need not sit at ln 2). An accuracy at 1/K with no loss logged at all is `info`:
K is then read off the accuracy alone.
"""

from __future__ import annotations

import math
import re
from typing import Any

from stethoscope.detect.config import DetectConfig
from stethoscope.findings.catalogue import PLATEAU, UNDERFITTING
from stethoscope.records import EVAL_LOSS, LOSS, Finding, StepRecord

_ACCURACY = re.compile(r"^(?:eval|val|valid|validation|test)/(?:\w+?[_/])*(?:acc|accuracy|top1|acc1)$", re.IGNORECASE)
_AUC = re.compile(r"^(?:eval|val|valid|validation|test)[/_](?:\w+?[_/])*(?:auc|auroc|roc_auc|auc_roc)$", re.IGNORECASE)
_AUC_TOL = 0.03  # every eval's ROC AUC within this of 0.5: the scores rank positives no better than a coin
_MIN_EVALS = 3  # accuracy evals, the whole run's worth
_MIN_LOSSES = 3
_MAX_CLASSES = 1000
_ACC_REL = 0.1  # every eval's accuracy within this share of 1/K (a balanced eval set, a constant prediction)
_LOSS_REL = 0.02  # the loss at the start, at the end and at its lowest within this share of ln(K)
_KEPT = 4096
_REMEDIES = (
    ("an LR too small to move the weights", "check the LR the optimizer uses; raise it (try 10x)"),
    ("the trainable parameters are not in the optimizer (a LoRA adapter, a new head, requires_grad off)",
     "print the parameters with requires_grad and those in optimizer.param_groups; they must match"),
    ("labels that do not match the inputs (shuffled apart, the wrong column)",
     "overfit one batch: the loss must fall below ln(K); check a few (input, label) pairs by eye"),
)


class ChanceLevelDetector:
    """Follows the train and eval loss and the eval accuracy; reports at `finish` a run that never left chance."""

    name = "chance"

    def __init__(self, config: DetectConfig | None = None) -> None:
        self.acc: list[list[float]] = []  # [step, accuracy as a fraction]
        self.loss: list[list[float]] = []  # [step, loss]: the train loss, else the eval loss
        self.eval_loss: list[list[float]] = []
        self.auc: list[list[float]] = []  # [step, ROC AUC]
        self._names: dict[str, bool] = {}
        self._auc_names: dict[str, bool] = {}

    def update(self, record: StepRecord) -> list[Finding]:
        names, isfinite = self._names, math.isfinite  # every record, every value: no lookups it can skip
        for name, value in record.values.items():
            if isfinite(value) and (names[name] if name in names else self._is_accuracy(name)):
                self._keep(self.acc, record.step, value / 100.0 if 1.0 < value <= 100.0 else value)
                break
        auc_names = self._auc_names
        for name, value in record.values.items():
            known = auc_names.get(name)
            if known is None:
                known = auc_names[name] = _AUC.match(name) is not None
            if known and isfinite(value):
                self._keep(self.auc, record.step, value / 100.0 if 1.0 < value <= 100.0 else value)
                break
        for key, series in ((LOSS, self.loss), (EVAL_LOSS, self.eval_loss)):
            v = record.values.get(key)
            if v is not None and math.isfinite(v):
                self._keep(series, record.step, v)
        return []

    def finish(self) -> list[Finding]:
        at_chance = self._auc_at_chance()
        if at_chance:
            return at_chance
        acc = [v for _, v in self.acc]
        if len(acc) < _MIN_EVALS or not 0.0 < min(acc):
            return []
        k = round(1.0 / (sum(acc) / len(acc)))
        if not 2 <= k <= _MAX_CLASSES or any(abs(a - 1.0 / k) > _ACC_REL / k for a in acc):
            return []
        chance = math.log(k)
        losses = self.loss if len(self.loss) >= _MIN_LOSSES else self.eval_loss
        if not losses and len(acc) >= 2 * _MIN_EVALS:
            return [self._accuracy_only(acc, k)]
        if len(losses) < _MIN_LOSSES:
            return []
        values = [v for _, v in losses]
        head, tail = _median(values[:_MIN_LOSSES]), _median(values[-_MIN_LOSSES:])
        if any(abs(x - chance) > _LOSS_REL * chance for x in (head, tail)) or min(values) < (1 - _LOSS_REL) * chance:
            return []
        first, last = int(min(losses[0][0], self.acc[0][0])), int(max(losses[-1][0], self.acc[-1][0]))
        msg = (f"the model never left chance level: the eval accuracy is {min(acc):.3g}-{max(acc):.3g} at all "
               f"{len(acc)} evals from step {int(self.acc[0][0])} to {int(self.acc[-1][0])}, 1/{k} (a guess among "
               f"{k} classes), and the loss stays at {head:.4g} -> {tail:.4g}, ln({k}) = {chance:.4g}, the loss of a "
               "uniform guess: nothing was learned")
        evidence: dict[str, Any] = {"classes": k, "chance_loss": chance, "accuracy_min": min(acc),
                                    "accuracy_max": max(acc), "evals": len(acc), "start_level": head,
                                    "level": tail, "series": "eval/accuracy", "verdict": True}
        causes, fixes = zip(*_REMEDIES)
        return [Finding(UNDERFITTING, "warning", first, msg, end_step=last, evidence=evidence, source=self.name,
                        symptoms=[{"type": PLATEAU, "step": first}], causes=list(causes), fixes=list(fixes))]

    def _auc_at_chance(self) -> list[Finding]:
        """Every eval's ROC AUC at 0.5 (`_AUC_TOL`), the whole run: a binary classifier's scores that rank a positive
        above a negative no more often than a coin would. AUC needs no class count, so it alone is the evidence."""
        auc = [v for _, v in self.auc]
        if len(auc) < _MIN_EVALS or any(abs(a - 0.5) > _AUC_TOL for a in auc):
            return []
        first, last = int(self.auc[0][0]), int(self.auc[-1][0])
        msg = (f"the model never left chance level: the eval ROC AUC is {min(auc):.3g}-{max(auc):.3g} at all "
               f"{len(auc)} evals from step {first} to {last}, 0.5 being a coin toss: its scores do not rank the "
               "positives above the negatives, nothing was learned")
        if len(self.loss) >= _MIN_LOSSES:
            msg += f" (the loss {self.loss[0][1]:.4g} -> {self.loss[-1][1]:.4g})"
        evidence: dict[str, Any] = {"chance_auc": 0.5, "auc_min": min(auc), "auc_max": max(auc), "evals": len(auc),
                                    "series": "eval/auc", "verdict": True}
        causes, fixes = zip(*_REMEDIES)
        return [Finding(UNDERFITTING, "warning", first, msg, end_step=last, evidence=evidence, source=self.name,
                        symptoms=[{"type": PLATEAU, "step": first}], causes=list(causes), fixes=list(fixes))]

    def _accuracy_only(self, acc: list[float], k: int) -> Finding:
        """Accuracy at 1/K at every eval, no loss logged to back it: `info` (K is read off the accuracy itself; a
        model that learned to exactly 1/K of a harder task before its first eval reads the same)."""
        first, last = int(self.acc[0][0]), int(self.acc[-1][0])
        msg = (f"the model may never have left chance level: the eval accuracy is {min(acc):.3g}-{max(acc):.3g} at "
               f"all {len(acc)} evals from step {first} to {last}, 1/{k} (a guess among {k} classes); no loss is "
               "logged to confirm it")
        evidence: dict[str, Any] = {"classes": k, "accuracy_min": min(acc), "accuracy_max": max(acc),
                                    "evals": len(acc), "series": "eval/accuracy"}
        causes, fixes = zip(*_REMEDIES)
        return Finding(UNDERFITTING, "info", first, msg, end_step=last, evidence=evidence, source=self.name,
                       symptoms=[{"type": PLATEAU, "step": first}], causes=list(causes), fixes=list(fixes))

    def _is_accuracy(self, name: str) -> bool:
        known = self._names.get(name)
        if known is None:  # one regex match per name, not per record: update runs on every training step
            known = self._names[name] = _ACCURACY.match(name) is not None
        return known

    def _keep(self, series: list[list[float]], step: int, value: float) -> None:
        series.append([float(step), value])
        if len(series) > _KEPT:  # the first records stay: "from the start" is judged on them
            del series[_MIN_LOSSES]

    def state_dict(self) -> dict[str, Any]:
        return {"acc": [list(p) for p in self.acc], "loss": [list(p) for p in self.loss],
                "eval_loss": [list(p) for p in self.eval_loss], "auc": [list(p) for p in self.auc]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.acc = [list(p) for p in state.get("acc", [])]
        self.loss = [list(p) for p in state.get("loss", [])]
        self.eval_loss = [list(p) for p in state.get("eval_loss", [])]
        self.auc = [list(p) for p in state.get("auc", [])]


def _median(values: list[float]) -> float:
    s = sorted(values)
    return s[len(s) // 2] if len(s) % 2 else 0.5 * (s[len(s) // 2 - 1] + s[len(s) // 2])
