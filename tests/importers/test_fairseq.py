from __future__ import annotations

from pathlib import Path

from stethoscope.importers.fairseq import FairseqImporter
from stethoscope.logtext.names import EPOCH
from stethoscope.records import EVAL_LOSS, GRAD_NORM, LOSS, LOSS_SCALE, LR, SKIPPED, TOKENS_PER_S
from tests.importers.series import names, series

MODERN = """2020-03-23 11:30:00 | INFO | fairseq_cli.train | model transformer, criterion LabelSmoothedCrossEntropy
2020-03-23 11:37:00 | INFO | train_inner | epoch 002:    300 / 356 loss=9.9, nll_loss=9.1, ppl=549.2, wps=31000.5, ups=0.07, wpb=430000, bsz=14000, num_updates=650, lr=0.0001625, gnorm=40.5, loss_scale=0.5, train_wall=300, wall=9500
2020-03-23 11:38:13 | INFO | train | epoch 002 | loss 9.803 | nll_loss 8.89 | ppl 474.37 | wps 31194.9 | num_updates 695 | lr 0.00017375 | gnorm 55.005 | loss_scale 0 | train_wall 4512 | wall 9786
2020-03-23 11:38:31 | INFO | valid | epoch 002 | valid on 'valid' subset | loss 9.393 | nll_loss 8.328 | ppl 321.26 | num_updates 695 | best_loss 9.393
2020-03-23 11:39:44 | INFO | train_inner | epoch 003:      5 / 356 loss=9.44, nll_loss=8.44, num_updates=700, lr=0.000175, gnorm=156.036, loss_scale=0, wall=9877
2020-03-23 11:41:18 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 0.00048828125
2020-03-23 11:48:04 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 0.000244140625
"""


def test_modern_text_log(write) -> None:
    run = FairseqImporter().read(write("train.log", MODERN))
    assert run.format == "fairseq"
    assert series(run, LOSS) == {650: 9.9, 695: 9.803, 700: 9.44}
    assert series(run, GRAD_NORM) == {650: 40.5, 695: 55.005, 700: 156.036}
    assert series(run, LR)[700] == 0.000175
    assert series(run, TOKENS_PER_S)[650] == 31000.5
    assert series(run, EVAL_LOSS) == {695: 9.393}
    assert series(run, "eval/best_loss") == {695: 9.393}
    assert series(run, EPOCH) == {650: 2.0, 695: 2.0, 700: 3.0}
    # `loss_scale 0` is rounding; the two overflows land on the update after the last one logged
    assert series(run, LOSS_SCALE) == {650: 0.5, 701: 0.000244140625}
    assert series(run, SKIPPED) == {701: 2.0}
    assert "loss_scale_zero" in run.meta["notes"]
    assert {p.time for p in run.points if p.step == 650} == {1584963420.0}
    assert [ln.line for ln in run.lines] == [1, 6, 7]
    assert run.lines[1].step == 700


LEGACY = """| epoch 027:    100 / 400 loss=6.2, nll_loss=4.9, ppl=29.9, wps=160000, ups=0.4, num_updates=10100, lr=0.0006, gnorm=0.35, clip=0%, oom=0, loss_scale=1.000, wall=22800
| epoch 027 | loss 6.343 | nll_loss 4.984 | ppl 31.65 | num_updates 10198 | lr 0.000626286 | gnorm 0.390 | clip 0% | oom 0 | loss_scale 0.500 | wall 23080 | train_wall 21383
| epoch 027 | valid on 'valid' subset | valid_loss 8.30118 | valid_nll_loss 7.15366 | valid_ppl 142.39 | num_updates 10198 | best 4.46376
| WARNING: overflow detected, setting loss scale to: 0.25
| WARNING: overflow detected, setting loss scale to: 0.125
| epoch 028:    100 / 400 loss=9.5, num_updates=10298, loss_scale=0.125
Traceback (most recent call last):"""


def test_legacy_text_log(write) -> None:
    run = FairseqImporter().read(write("train.log", LEGACY))
    assert series(run, LOSS) == {10100: 6.2, 10198: 6.343, 10298: 9.5}
    assert series(run, EVAL_LOSS) == {10198: 8.30118}
    assert series(run, "eval/nll_loss") == {10198: 7.15366}
    assert series(run, "eval/best_loss") == {10198: 4.46376}
    assert series(run, "grad/clipped_pct") == {10100: 0.0, 10198: 0.0}
    assert series(run, SKIPPED) == {10298: 2.0}  # the two overflows, at the next train line
    assert series(run, LOSS_SCALE) == {10100: 1.0, 10198: 0.5, 10298: 0.125}
    assert "eval/epoch" not in names(run)
    assert [ln.line for ln in run.lines] == [4, 5, 7]
    assert run.warnings == []


def test_json_progress_lines_with_prefix(write) -> None:
    text = ('2021-01-01 00:00:00 | INFO | train_inner | {"epoch": 1, "update": 1.001, "loss": "15.683", '
            '"num_updates": "20", "gnorm": "10.484"}\n'
            '2021-01-01 00:10:00 | INFO | valid | {"epoch": 1, "valid_loss": "9.1", "valid_ppl": "548.2", '
            '"valid_num_updates": "20"}\n')
    run = FairseqImporter().read(write("train.log", text))
    assert series(run, LOSS) == {20: 15.683}
    assert series(run, GRAD_NORM) == {20: 10.484}
    assert series(run, EVAL_LOSS) == {20: 9.1}
    assert series(run, "eval/ppl") == {20: 548.2}


def test_cut_last_line_is_reported(write) -> None:
    path = write("train.log", LEGACY.split("Traceback")[0] + "| epoch 028:    200 / 400 loss=9.1, num_upd")
    run = FairseqImporter().read(path)
    assert run.warnings == [f"{path}:7: the last line looks cut short (no newline, no metrics read from it)"]


def test_sniff() -> None:
    imp = FairseqImporter()
    assert imp.sniff(Path("t.log"), MODERN)
    assert imp.sniff(Path("t.log"), LEGACY)
    assert not imp.sniff(Path("t.log"), "iter 1: loss 2.0, time 3.00ms, mfu 1.00%")
