"""Deeplearning4j's ScoreIterationListener: `Score at iteration N is V`, the network's score (its loss function's
value on the minibatch), is the train loss at step N."""

from __future__ import annotations

from stethoscope.records import LOSS
from tests.importers.series import read_text, series


def test_dl4j_score_is_the_train_loss() -> None:
    text = "".join(f"11:50:{i:02d}.000 [main] INFO  o.d.o.l.ScoreIterationListener - Score at iteration {10 * i} is "
                   f"{1.5 - i / 100}\n" for i in range(8))
    assert series(read_text(text), LOSS) == {10 * i: 1.5 - i / 100 for i in range(8)}
