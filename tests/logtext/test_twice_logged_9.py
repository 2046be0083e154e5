"""The TensorFlow Object Detection API's train log (the eighth grammar's tfod_step): `Step N per-step time`,
then the loss dict `pprint`ed a key a line, each printed twice (TensorFlow's logger and absl's). One record a
step, `Loss/total_loss` the train loss. Read short (line by line) and long (a shape at a time)."""

from __future__ import annotations

import pytest

from stethoscope.records import LOSS, STEP_TIME
from tests.importers.series import read_text, series

LINES = [12, 3000]


def _tfod(records: int, every: int = 100) -> tuple[str, dict[int, float]]:
    out, truth = [], {}
    for k in range(records):
        step, total = every * k, round(0.9 - k / 100_000, 8)
        truth[step] = total
        t = k * 3
        absl = f"I0724 11:{t // 60 % 60:02d}:{t % 60:02d}.{t * 7919 % 1000000:06d} 140532679501696 model_lib_v2.py:"
        line = f"Step {step} per-step time {0.4 + k % 7 / 100:.3f}s"
        body = ("{" + f"'Loss/classification_loss': {total / 3:.8g},\n 'Loss/localization_loss': {total / 2:.8g},\n"
                f" 'Loss/regularization_loss': {total / 6:.8g},\n 'Loss/total_loss': {total},\n"
                f" 'learning_rate': {0.0319994 + k / 1e9:.10g}" + "}")
        out.append(f"INFO:tensorflow:{line}\n{absl}705] {line}\nINFO:tensorflow:{body}\n{absl}708] {body}")
    return "\n".join(out) + "\n", truth


@pytest.mark.parametrize("label", ["", "[0] "])
@pytest.mark.parametrize("records", LINES)
def test_the_object_detection_apis_loss_dict_is_one_record_a_step(records: int, label: str) -> None:
    """The dict's lines after its first were no record (no train loss read); read, each step held every
    value twice. `mpiexec -l`'s `[0] ` before absl's `I0724 ..` header is the rank's label, not a step 0."""
    text, truth = _tfod(records)
    text = "".join(label + line + "\n" for line in text.splitlines())
    run = read_text(text)
    losses = [(s, v) for n, s, v in zip(run.columns.names, run.columns.steps, run.columns.values) if n == LOSS]
    assert losses == list(truth.items())
    times = [s for n, s in zip(run.columns.names, run.columns.steps) if n == STEP_TIME]
    assert times == list(truth)
    parts = [n for n in set(run.columns.names) if n.endswith("classification_loss")]
    assert len(parts) == 1 and len(series(run, parts[0])) == records


def test_a_step_logged_again_after_others_keeps_its_points_and_a_new_value_at_a_step_is_kept() -> None:
    """A resume repeats steps: not a second logger's copy. Two values of one name at a step both stay."""
    text = "".join(f"step {s} loss {3 - s / 100}\n" for s in range(10, 60, 10))
    text += "".join(f"step {s} loss {3 - s / 100}\n" for s in range(30, 60, 10))  # resumed from step 30
    text += "step 60 loss 2.3\nstep 60 loss 2.31\n"
    run = read_text(text)
    losses = [(s, v) for n, s, v in zip(run.columns.names, run.columns.steps, run.columns.values) if n == LOSS]
    assert [s for s, _ in losses] == [10, 20, 30, 40, 50, 30, 40, 50, 60, 60]
