"""A run that logs a test loss through training and no validation loss evaluates on its test split: that
test loss is its eval loss (DeiT/MAE's `log.txt` writes `test_loss` every epoch; a PyTorch example prints
`Test set: Average loss` after each). The overfitting and frozen-weights checks judge it then, as they judge
any eval loss. A test loss logged once (the final evaluation after training) stays `test/loss`."""

from __future__ import annotations

from stethoscope.logtext.columns import Columns, ImportedRun
from stethoscope.records import EVAL_LOSS

TEST_LOSS = "test/loss"


def eval_from_test(run: ImportedRun) -> ImportedRun:
    """`run` with its test loss renamed to the eval loss when it has no eval loss and tests at 2+ steps."""
    columns = run.columns
    labels = getattr(columns, "labels", None)  # a big log's CodedColumns (numpy: not imported here)
    if labels is not None:
        if EVAL_LOSS in labels or TEST_LOSS not in labels:
            return run
        code = labels.index(TEST_LOSS)
        if len(set(columns.step_array[columns.codes == code].tolist())) < 2:
            return run
        columns.labels = [EVAL_LOSS if n == TEST_LOSS else n for n in labels]
        columns._lists = None  # the per-point lists, if built, carry the old name
    else:
        names = columns.names
        if EVAL_LOSS in names or TEST_LOSS not in names:
            return run
        if len({s for n, s in zip(names, columns.steps) if n == TEST_LOSS}) < 2:
            return run
        run._columns = Columns(*(([EVAL_LOSS if n == TEST_LOSS else n for n in names],) + tuple(columns[1:])))
    run._points = None
    note = "no validation loss: the test loss, logged through the run, is the eval loss"
    run.meta.setdefault("notes", {})["eval"] = note
    return run
