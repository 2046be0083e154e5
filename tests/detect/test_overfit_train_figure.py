"""The overfitting message's train-loss figure is taken beside the eval it names (the last one), not where the
incident opened: a real Keras fit read 'train loss fell 1.337 -> 1.25' where its train loss ended near 0.004."""

from __future__ import annotations

from pathlib import Path

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.findings.catalogue import OVERFITTING
from stethoscope.importers import read_any

LOG = Path(__file__).parents[1] / "assets" / "real_trainers" / "keras_fit-overfit-s0" / "console.log.gz"


def test_the_train_figure_is_the_one_beside_the_last_eval() -> None:
    (run,) = read_any(LOG)
    (f,) = [x for x in diagnose_run(run).findings if x.type == OVERFITTING]
    assert "to 3.038" in f.message  # the log's last eval
    assert f.evidence["train_loss"] < 0.1 < f.evidence["train_loss_at_best"]
    assert "train loss (its smoothed level) fell 1.337 -> 0.07" in f.message
