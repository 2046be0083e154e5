"""`objective` is the value the optimiser minimises: the train loss (an eval's `val_objective` is the eval loss)."""

from __future__ import annotations

from stethoscope.logtext.names import metric
from stethoscope.records import EVAL_LOSS, LOSS
from tests.importers.series import read_text, series


def test_objective_names_the_loss() -> None:
    assert metric("objective").name == LOSS
    assert metric("objective", "eval").name == EVAL_LOSS


def test_a_log_of_objective_values_has_a_train_loss() -> None:
    text = "".join(f"Epoch[0] Batch [{s}] - objective: {3.0 - s / 100:.4f} - step_time: 294ms\n" for s in range(0, 50, 5))
    assert series(read_text(text), LOSS)[45] == 2.55
