"""A metric written as a sentence, `<name> is <value>` (wild-logs-4's M2: Paddle PredNet's `Epoch 0, Step 25, total
used time 7.18 (s), avg loss so far is 0.1098` and `Epoch 0, val loss is 0.0477, val mse is 0.0242.`): the verb was
read as part of the name, a name ending in a function word is prose, and only the clock was kept: no loss at all."""

from __future__ import annotations

import pytest

from stethoscope.records import EVAL_LOSS, LOSS
from tests.importers.series import names, read_text, series


def _paddle(epochs: int) -> str:
    out = ["Start training!"]
    for e in range(epochs):
        out.append(f"Starting epoch {e} current lr is 0.001")
        for s in range(25, 126, 25):
            out.append(f"Epoch {e}, Step {s}, total used time {7.18 * (e * 5 + s / 25):.4f} (s), avg loss so far is "
                       f"{0.1 / (1 + e) + 0.01 / s:.6f}")
        out.append(f"Epoch {e}, val loss is {0.05 - e / 1000:.6f}, val mse is {0.025 - e / 2000:.6f}.")
    return "\n".join(out) + "\n"


def test_a_metric_phrased_as_a_sentence_is_read_by_its_name() -> None:
    run = read_text(_paddle(6))
    loss = series(run, LOSS)
    assert len(loss) == 30
    assert loss[min(loss)] == pytest.approx(0.1 + 0.01 / 25)
    assert sorted(series(run, EVAL_LOSS).values(), reverse=True) == pytest.approx([0.05 - e / 1000 for e in range(6)])
    assert "eval/mse" in names(run)
    assert not any(n.endswith("_is") for n in names(run))


def test_prose_that_ends_in_a_verb_is_still_no_metric() -> None:
    """A subject with a function word or a pronoun is a sentence's (a generated answer printed between records)."""
    text = "".join(f"step {s} | loss {2 - s / 100:.3f}\nSo the cost of one set is {s}\nthe best we know is {s}\n"
                   for s in range(1, 9))
    assert names(read_text(text)) == {LOSS}
