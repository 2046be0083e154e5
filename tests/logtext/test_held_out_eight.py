"""The classes the eighth held-out grammar (`bench/log_grammar.py` HELD, forms in `bench/log_grammar_eighth.py`;
scored once, now spent) showed, one test per class: each log is read short (line by line) and long (a shape at
a time), and the series must hold what the trainer printed, at its steps."""

from __future__ import annotations

import pytest

from stethoscope.logtext.console_line import parse
from stethoscope.logtext.names import metric
from stethoscope.records import EVAL_LOSS, LOSS, STEP_TIME
from tests.importers.series import read_text, series

LINES = [12, 3000]


def _loss(i: int) -> float:
    return round(3 - i / 100_000, 5)


def _wlm(n: int, per_epoch: int, first_epoch: int = 1) -> tuple[str, dict[int, float]]:
    """PyTorch's word_language_model: the batch within the epoch of `len(train_data) // bptt`, logged every 5."""
    lines, truth = [], {}
    for k in range(n):
        step = (first_epoch - 1) * per_epoch + 5 * k
        epoch, batch = 1 + step // per_epoch, step % per_epoch
        truth[step] = _loss(k)
        lines.append(f"| epoch {epoch:3d} | {batch:5d}/{per_epoch:5d} batches | lr 20.00 | ms/batch 45.61 | "
                     f"loss {_loss(k):7.5f} | ppl  2061.42")
        if batch + 5 >= per_epoch:
            lines += ["-" * 89, f"| end of epoch {epoch:3d} | time: 140.20s | valid loss  5.81 | valid ppl   333.70",
                      "-" * 89]
    return "\n".join(lines) + "\n", truth


@pytest.mark.parametrize("n", LINES)
def test_a_count_of_a_total_before_batches_is_the_step_within_the_epoch(n: int) -> None:
    """`|   200/ 2983 batches |` after `| epoch   1 |` counts the epoch's batches: the step adds the earlier
    epochs' (it was no counter at all: the epoch was read as the step)."""
    text, truth = _wlm(n, per_epoch=23)
    run = read_text(text)
    assert series(run, LOSS) == pytest.approx(truth)
    assert set(series(run, EVAL_LOSS).values()) == {5.81}
    assert series(run, STEP_TIME)[5] == pytest.approx(0.04561)


def test_a_log_that_starts_in_a_later_epoch_counts_the_epochs_before_it() -> None:
    """A tail (or a resumed run) that starts in epoch 91 of 11 batches: its first record is step 90 * 11 + b,
    as the whole log would have read it (it was read from 0)."""
    text, truth = _wlm(40, per_epoch=11, first_epoch=91)
    assert series(read_text(text), LOSS) == pytest.approx(truth)


def _coqui(n: int, prefix: str) -> tuple[str, dict[int, float], dict[int, float]]:
    lines, truth, evals = [], {}, {}
    for k in range(n):
        step = 12 * k
        truth[step] = _loss(k)
        lines += [f"{prefix}   --> TIME: 2024-07-24 11:{k // 60 % 60:02d}:{k % 60:02d} -- STEP: {step % 51}/51 -- "
                  f"GLOBAL_STEP: {step}",
                  f"     | > loss: {_loss(k)}  ({_loss(k) + 0.1})",
                  "     | > current_lr: 5e-06 ",
                  f"     | > step_time: 0.9740  (0.98377)"]
        if k % 3 == 2:
            evals[step] = _loss(k) + 2
            lines += [f"{prefix}  --> EVAL PERFORMANCE", "     | > avg_loader_time: 0.0281 (+0.0000)",
                      f"     | > avg_loss: {_loss(k) + 2} (-0.00094)"]
    return "\n".join(lines) + "\n", truth, evals


@pytest.mark.parametrize("n", LINES)
@pytest.mark.parametrize("prefix", ["", "[NeMo I 2024-07-24 11:20:33 nemo_logging:349] ",
                                    "[0] 07/24 11:00:03 [trainer][INFO] "])
def test_coqui_records_a_value_a_line_under_a_global_step(n: int, prefix: str) -> None:
    """Coqui TTS prints `--> TIME: <date> -- STEP: 24/406 -- GLOBAL_STEP: 25`, then `| > key: value (avg)` a line:
    the global counter is the step, the date no metric, the `| >` lines its record; under `--> EVAL PERFORMANCE`
    they are the eval's (its `avg_loss` was read as the train loss; the date's year as a value)."""
    text, truth, evals = _coqui(n, prefix)
    run = read_text(text)
    assert series(run, LOSS) == pytest.approx(truth)
    assert series(run, EVAL_LOSS) == pytest.approx(evals)
    assert series(run, STEP_TIME)[12] == pytest.approx(0.974)


@pytest.mark.parametrize("n", LINES)
def test_icefalls_global_batch_index_is_the_step(n: int) -> None:
    """icefall: `Epoch 1, batch 10, global_batch_idx: 110, ...`: `batch` counts within the epoch, the global index
    is the step (the batch, read as the step, began a tail of the log at its epoch's count)."""
    lines, truth = [], {}
    for k in range(n):
        step = 650 + 7 * k  # from epoch 3 on (a tail)
        truth[step] = _loss(k)
        lines.append(f"Epoch {1 + step // 300}, batch {step % 300}, global_batch_idx: {step}, batch size: 56, "
                     f"loss[loss={_loss(k)}, simple_loss=0.8, pruned_loss=0.1, over 2828.00 frames. ], "
                     f"tot_loss[loss=0.47, over 50000.00 frames. ], cur_lr: 4.5e-02, grad_scale: 2.0")
    assert series(read_text("\n".join(lines) + "\n"), LOSS) == pytest.approx(truth)


@pytest.mark.parametrize(("raw", "name"), [
    ("tr_loss", LOSS), ("trn_loss", LOSS), ("train_mse", LOSS), ("Train MSE", LOSS), ("trn_acc", "train/acc"),
    ("val_mse", "eval/mse"), ("mse", "mse"),
])
def test_abbreviated_train_splits_and_a_train_mse_are_the_train_loss(raw: str, name: str) -> None:
    """`tr_`/`trn_` abbreviate the train split; the mean squared error printed as the train split's metric is a
    regression's objective (a bare `mse`, Keras's metric beside its `loss`, stays a metric)."""
    assert metric(raw).name == name


@pytest.mark.parametrize("n", LINES)
@pytest.mark.parametrize("rank", ["", "0: "])
def test_a_calls_shown_value_is_the_calls_and_a_float32_f_is_its_exponent(n: int, rank: str) -> None:
    """Flux.jl: `[ Info: Epoch 3`, then a callback's `@show loss(x, y)`: `loss(x, y) = 4.2778687f0` is the epoch's
    train loss (it was read under the key `f0`, or a rank label's `0` as the loss)."""
    lines = []
    for e in range(1, n + 1):
        lines += [f"{rank}[ Info: Epoch {e}", f"{rank}loss(x, y) = {_loss(e)}f0"]
    loss = series(read_text("\n".join(lines) + "\n"), LOSS)
    assert loss == pytest.approx({e: _loss(e) for e in range(1, n + 1)})
    assert parse("grad(w) = 1.5f-3").values[0].text == "1.5e-3"


def test_a_traceback_marker_is_no_continued_record() -> None:
    """loguru marks the failing frame `> File "..", line 98, in launch`: no metric follows, no record continues."""
    assert not parse('> File "yolox/core/launch.py", line 98, in launch').record
    assert parse("     | > loss: 0.56  (0.60)").record
    assert parse("     | > lm loss: 0.56  (0.60)").record and parse("[R0]      | > Train loss: 4.57  (4.67)").record
