"""fairseq's end-of-epoch summaries among another trainer's records: that trainer's own reader reads them."""

from __future__ import annotations

from pathlib import Path

from stethoscope.importers.registry import read_any
from stethoscope.records import LOSS

_LITGPT = ("Epoch 1 | iter {it} step {st} | loss train: {loss}, val: n/a | iter time: 328.22 ms (step) "
           "remaining time: 1:38:29")
_SUMMARY = ("2024-07-24 11:{m:02d}:05 | INFO | fairseq_cli.train | end of epoch 1 (average epoch stats below)\n"
            "2024-07-24 11:{m:02d}:05 | INFO | train | epoch 001 | loss 5.075 | nll_loss 4.775 | ppl 27.38 | "
            "wps 12301.0 | ups 2.43 | wpb 2811.0 | bsz 96.0 | num_updates {st} | lr 2.5e-07 | gnorm 0.986 | "
            "train_wall 0 | gb_free 12.5 | wall 0\n"
            "2024-07-24 11:{m:02d}:05 | INFO | fairseq.trainer | begin training epoch 2")


def test_litgpt_steps_beside_fairseq_summaries_are_its_steps_not_its_iters(tmp_path: Path) -> None:
    lines = []
    for k in range(12):
        st, loss = 1 + 150 * k, f"{2.0 + (k * 7 % 5) / 4:.3f}"
        lines += [_LITGPT.format(it=4 * st, st=st, loss=loss), _SUMMARY.format(m=k, st=st)]
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    (run,) = read_any(path)
    names, steps, values, _ = (list(c) for c in run.columns)
    losses = [(s, v) for n, s, v in zip(names, steps, values) if n == LOSS]
    assert [s for s, _ in losses] == [1 + 150 * k for k in range(12)]  # LitGPT's step, not its iter (4, 604, ..)
    assert losses[1][1] == 2.0 + 7 % 5 / 4  # the record's loss, not the summary's epoch mean (5.075)
