"""Keras 1's `fit(verbose=2)`: `Epoch 3/15` on a line of its own, then the epoch's one line with no count
(`64s - loss: 1.4631 - acc: 0.5405 - val_loss: 1.9335 - val_acc: 0.4755`): that epoch's record, train and eval
values both (wild-logs-5's R2: a sweep of such runs was refused, its overfitting lost). The step is the epoch:
nothing finer is printed. Several fits one after the other stay several runs. Synthetic excerpt in the shape."""

from __future__ import annotations

from pathlib import Path

from stethoscope.importers import read_any
from stethoscope.records import EVAL_LOSS, LOSS
from tests.importers.series import series


def _fit(epochs: int, start: float) -> str:
    out = ["Building and compiling model ...\n------------- Model compiled in 3.91s ---------------\n",
           "('Cell type: LSTM', 'Drop Input: 0.1', 'Cell Count: 64')\nTrain on 8000 samples, validate on 2000 samples\n"]
    for e in range(1, epochs + 1):
        loss, val = start / e, 1.9 + abs(e - 4) / 10
        out.append(f"Epoch {e}/{epochs}\n{64 + e % 3}s - loss: {loss:.4f} - acc: {1 - loss / 3:.4f} - val_loss: "
                   f"{val:.4f} - val_acc: 0.4{e % 10}65\n")
    return "".join(out) + "Test accuracy: 0.4815\n\n"


def test_an_epoch_line_under_its_head_is_that_epochs_record(tmp_path: Path) -> None:
    path = tmp_path / "results.txt"
    path.write_text(_fit(15, 2.5), encoding="utf-8")
    (run,) = read_any(path)
    assert sorted(series(run, LOSS)) == list(range(1, 16))
    assert series(run, LOSS)[3] == round(2.5 / 3, 4)
    assert series(run, EVAL_LOSS)[4] == 1.9 and series(run, EVAL_LOSS)[15] == 3.0


def test_a_sweep_of_such_fits_is_a_run_each(tmp_path: Path) -> None:
    path = tmp_path / "results.txt"
    path.write_text(_fit(15, 2.5) + _fit(15, 2.6) + _fit(15, 2.4), encoding="utf-8")
    runs = read_any(path)
    assert [len(series(r, LOSS)) for r in runs] == [15, 15, 15]


def test_a_banner_between_records_printed_without_heads_heads_nothing(tmp_path: Path) -> None:
    """`Epoch 1/10` printed again and again between records that came before any head (lines the reader cannot
    number): not the epoch of the line after it (a spent grammar's log read as steps 1..4 by a first version)."""
    lines = [f"[0]<stdout>:2024-07-24T11:{i:02d}:03.111021039Z [INFO] [{1 + 100 * i}]\ttraining's epoch_loss: "
             f"{3 - i / 10:.4f}\tbatch_time: 0.380\tvalid_1's binary_logloss: {3.1 - i / 10:.4f}" for i in range(8)]
    text = "\n".join(lines[:3] + [x for line in lines[3:] for x in ("Epoch 1/10", line)]) + "\n"
    path = tmp_path / "train.log"
    path.write_text(text, encoding="utf-8")
    try:
        runs = read_any(path)
    except Exception:  # refused (the counter is not read): nothing misread
        return
    assert all(1 not in series(run, LOSS) or series(run, LOSS)[1] == 3.0 for run in runs)
