from __future__ import annotations

import pytest

from stethoscope.logtext.names import metric_name


@pytest.mark.parametrize("raw,name", [
    ("loss", "train/loss"), ("train/loss", "train/loss"), ("Loss/train", "train/loss"), ("train_loss", "train/loss"),
    ("eval/loss", "eval/loss"), ("val_loss", "eval/loss"), ("Loss/val", "eval/loss"), ("validation_loss", "eval/loss"),
    ("lr", "opt/lr"), ("learning_rate", "opt/lr"), ("learning-rate", "opt/lr"), ("train/learning_rate", "opt/lr"),
    ("lr-AdamW", "opt/lr"), ("lr-SGD-1", "opt/lr"), ("lr-AdamW/pg3", "opt/lr/group2"),
    ("lr_decay", "lr_decay"), ("lr-Adam-momentum", "lr-Adam-momentum"),
    ("grad_norm", "grad/norm"), ("grad-norm", "grad/norm"), ("gnorm", "grad/norm"),
    ("loss-scale", "amp/loss_scale"), ("lm loss", "train/loss"), ("lm loss validation", "eval/loss"),
    ("iteration-time", "perf/step_time_s"), ("epoch", "train/epoch"), ("val_acc", "eval/acc"),
    ("Accuracy/val", "eval/Accuracy"), ("test_f1", "test/f1"), ("eval_runtime", "eval/runtime_s"),
    ("eval_samples_per_second", "eval/samples_per_s"), ("my metric", "my_metric"), ("custom/thing", "custom/thing"),
    # an eval metric that is the LM loss (LLM Foundry's, printed by Composer); a train one is not the train loss
    ("metrics/eval/LanguageCrossEntropy", "eval/loss"), ("val/cross_entropy", "eval/loss"),
    ("metrics/train/LanguageCrossEntropy", "metrics/train/LanguageCrossEntropy"),
    ("eval/cross_entropy_weight", "eval/cross_entropy_weight"),
])
def test_metric_names(raw: str, name: str) -> None:
    assert metric_name(raw) == name


def test_namespace_applies_to_bare_names() -> None:
    assert metric_name("loss", "eval") == "eval/loss"
    assert metric_name("ppl", "eval") == "eval/ppl"
    assert metric_name("custom/x", "eval") == "custom/x"
