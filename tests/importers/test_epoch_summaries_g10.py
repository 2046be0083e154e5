"""fairseq's end-of-epoch line among another trainer's records is a summary (the epoch's mean loss), not a record."""

from __future__ import annotations

from stethoscope.importers import read_any
from stethoscope.importers.fairseq import FairseqImporter
from stethoscope.logtext.summaries import summary
from stethoscope.records import LOSS
from tests.importers.series import series

_END = """2024-07-24 11:00:14 | INFO | fairseq_cli.train | end of epoch 1 (average epoch stats below)
2024-07-24 11:00:14 | INFO | train | epoch 001 | loss 5.575 | nll_loss 5.275 | ppl 38.72 | wps 12441.0 | ups 2.63 | wpb 2811.0 | bsz 96.0 | num_updates {step} | lr 6.25e-07 | gnorm 1.026 | train_wall 1 | gb_free 12.5 | wall 2
2024-07-24 11:00:14 | INFO | fairseq.trainer | begin training epoch 2
"""


def _mixed() -> str:
    lines = []
    for step in range(12):
        lines.append(f"[2024-07-24 11:00:{step:02d},000] INFO [train.py:1039] [iteration {step:04d}] loss: {3.0 - step / 10:.4f}\n")
        if step in (4, 9):
            lines.append(_END.format(step=step))
    return "".join(lines)


def test_fairseq_epoch_summary_is_not_a_record_among_other_records(write) -> None:
    (run,) = read_any(write("train.log", _mixed()))
    losses = series(run, LOSS)
    assert sorted(losses) == list(range(12))
    assert losses[4] == 2.6 and losses[9] == 2.1  # the records' own, not the epoch mean 5.575


def test_fairseq_log_of_summaries_alone_still_reads_them(write) -> None:
    text = "".join(_END.format(step=s) for s in (400, 800, 1200))
    (run,) = read_any(write("train.log", text))
    assert series(run, LOSS) == {400: 5.575, 800: 5.575, 1200: 5.575}
    assert FairseqImporter().read(write("f.log", text)).meta["no_train_inner"]


def test_summary_lines() -> None:
    assert summary("INFO | train | epoch 002 | loss 4.025 | num_updates 1200")
    assert summary("{'train_runtime': 812.3, 'train_loss': 2.41}")
    assert not summary("INFO | train_inner | epoch 002:    450 / 1891 loss=4.1, num_updates=1200")
    assert not summary("INFO | valid | epoch 002 | valid on 'valid' subset | loss 4.2 | num_updates 1200")


_VALID = ("2024-07-24 11:00:01 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 3.732 | nll_loss 3.432 | "
          "ppl 10.79 | wps 30000.0 | wpb 2811.4 | bsz 96.3 | num_updates {step} | best_loss 3.732\n")


def test_fairseq_valid_lines_among_other_records_leave_the_train_loss_to_them(write) -> None:
    lines = []
    for step in range(0, 1200, 300):
        lines.append(f"2024-07-24 11:00:00 INFO root:train.py:88 Epoch(train) [1][{step:4d}/1004]; Loss/train "
                     f"{4.0 - step / 1000:.3f}; interval_runtime 0.312\n")
        lines.append(_VALID.format(step=step))
    (run,) = read_any(write("train.log", "".join(lines)))
    assert series(run, LOSS) == {0: 4.0, 300: 3.7, 600: 3.4, 900: 3.1}
