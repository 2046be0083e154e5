"""The classes the seventh held-out grammar (`bench/log_grammar.py` HELD, forms in `bench/log_grammar_seventh.py`;
scored once, now spent) showed, one test per class: each log is read short (line by line) and long (a shape at
a time), and the series must hold what the trainer printed, at its steps."""

from __future__ import annotations

import pytest

from stethoscope.logtext.console_line import parse
from stethoscope.logtext.names import metric
from stethoscope.records import EVAL_LOSS, LOSS
from tests.importers.series import read_bytes, read_text, series

LINES = [12, 3000]


def _loss(i: int) -> float:
    return round(3 - i / 10_000, 4)


# The prefixes before an eval line that the line parser does not shed: a logger's module and line (YOLOX's loguru
# format), `kubectl logs --prefix`, a launcher's `(rank=0)`.
PREFIXES = ["", "[R0] [24/07/2024 11:00:07] INFO     | yolox.core.trainer:253 - ", "(rank=0) ",
            "[pod/trainer-worker-0/pytorch] 2024-07-24 11:00:10.370 | train.py:80 - "]


@pytest.mark.parametrize("n", LINES)
@pytest.mark.parametrize("prefix", PREFIXES)
def test_a_line_that_names_its_split_before_an_epoch_is_an_eval_in_an_epoch_log(n: int, prefix: str) -> None:
    """Flax's MNIST prints one record an epoch (`epoch:  3, train_loss: ..`); PyTorch-Ignite's `Validation Results -
    Epoch[1] Avg loss: ..` and Flax ImageNet's `eval epoch: 1, loss: ..` are evals whatever comes before them: their
    epoch is when the eval ran, and their loss is never the train loss of the record numbered like that epoch."""
    lines = []
    for e in range(1, n + 1):
        lines.append(f"{prefix}epoch:{e:3d}, train_loss: {_loss(e):.4f}, train_accuracy: 92.83, test_accuracy: 98.19")
        if e % 2 == 0:
            lines.append(f"{prefix}Validation Results - Epoch[{e // 2}] Avg accuracy: 0.92 Avg loss: {_loss(e) + 1:.2f}")
        if e % 3 == 0:
            lines.append(f"{prefix}eval epoch: {e // 3}, loss: {_loss(e) + 2:.4f}, accuracy: 70.00")
    run = read_text("\n".join(lines) + "\n")
    loss = series(run, LOSS)
    assert sorted(loss) == list(range(1, n + 1)) and all(loss[e] == pytest.approx(_loss(e)) for e in loss)
    evals = series(run, EVAL_LOSS)
    assert evals[4] == pytest.approx(_loss(4) + 1, abs=0.006) and evals[9] == pytest.approx(_loss(9) + 2)


def test_a_split_named_after_the_epoch_is_no_eval() -> None:
    """The rule takes a split word before the epoch only: `epoch: 3, train_loss: .., val_loss: ..` (the split in a
    metric's name) and GluonTS's `Epoch[3] Evaluation metric 'epoch_loss'=..` (its train loss) stay train records."""
    assert not parse("epoch:  3, train_loss: 0.2375, val_loss: 0.3").eval
    assert not parse("Epoch[3] Evaluation metric 'epoch_loss'=0.87").eval
    assert parse("Validation Results - Epoch[1] Avg accuracy: 0.92 Avg loss: 4.39").eval


@pytest.mark.parametrize(("raw", "name"), [
    ("learn", LOSS), ("train-logloss", LOSS), ("eval-logloss", EVAL_LOSS), ("train-mlogloss", LOSS),
    ("training's binary_logloss", LOSS), ("valid_1's binary_logloss", EVAL_LOSS), ("valid_0's multi_logloss", EVAL_LOSS),
    ("epoch_loss", LOSS), ("validation_epoch_loss", EVAL_LOSS), ("train-auc", "train/auc"), ("eval-error", "eval/error"),
])
def test_the_loss_names_of_boosting_and_forecasting_trainers(raw: str, name: str) -> None:
    """CatBoost's `learn`, XGBoost's `train-<metric>` (its log loss the cross-entropy it trains on), LightGBM's
    `training's <metric>` and GluonTS's `epoch_loss` are the train loss; `eval-`, `valid_1's`, `validation_` the
    eval's. A metric that is no loss keeps its own name in its split (`train-auc`)."""
    assert metric(raw).name == name


def test_an_eval_lines_epoch_loss_is_the_evals() -> None:
    assert metric("epoch_loss", "eval").name == EVAL_LOSS and metric("train_loss", "eval").name == LOSS


def _catboost(n: int) -> str:
    out = ["Learning rate set to 0.057693"]
    for i in range(n):
        out.append(f"{i}:\tlearn: {_loss(i):.7f}\ttest: {_loss(i) + 0.01:.7f}\tbest: {_loss(i) + 0.01:.7f} ({i})\t"
                   f"total: {57 + i * 0.9:.1f}ms\tremaining: {(n - i) * 0.0009:.2f}s")
    return "\n".join(out) + "\n"


def _xgboost(n: int) -> str:
    return "".join(f"[{i}]\ttrain-logloss:{_loss(i):.5f}\teval-logloss:{_loss(i) + 0.1:.5f}\n" for i in range(n))


def _lightgbm(n: int) -> str:
    return "".join(f"[{i}]\ttraining's binary_logloss: {_loss(i):g}\tvalid_1's binary_logloss: {_loss(i) + 0.1:g}\n"
                   for i in range(1, n + 1))


@pytest.mark.parametrize("n", LINES)
@pytest.mark.parametrize("log", [_catboost, _xgboost, _lightgbm])
def test_a_count_heading_a_tab_is_the_boosting_round(n: int, log) -> None:  # noqa: ANN001
    """`N:\\t` (CatBoost) and `[N]\\t` (XGBoost, LightGBM) head each round's metrics: the round is the step, the
    train set's metric the train loss, the eval set's the eval loss (CatBoost's `best: .. (N)` is no step)."""
    run = read_text(log(n))
    loss, evals = series(run, LOSS), series(run, EVAL_LOSS)
    first = 1 if log is _lightgbm else 0
    assert sorted(loss) == list(range(first, first + n)) and loss[first + 5] == pytest.approx(_loss(first + 5))
    if log is not _catboost:
        assert evals[first + 5] == pytest.approx(_loss(first + 5) + 0.1)


def test_a_count_after_another_before_a_tab_is_no_round() -> None:
    """SwAV prints `Epoch: [0][50]\tTime ..\tLoss ..`: the `[50]` before the tab is the batch within epoch 0, not a
    boosting round. The tabs read exactly as spaces would (a real SwAV log read 22 steps for its 400 epochs)."""
    lines = [f"INFO - 09/02/20 14:19:41 - 0:02:03 - Epoch: [{e}][{b}]\tTime 1.9 (1.9)\tData 0.000 (0.014)\t"
             f"Loss {_loss(e * 3 + b // 50):.4f} ({_loss(e * 3):.4f})\tLr: 0.0019" for e in range(6) for b in (0, 50, 100)]
    tabs, spaces = read_text("\n".join(lines) + "\n"), read_text("\n".join(lines).replace("\t", "  ") + "\n")
    assert series(tabs, LOSS) == series(spaces, LOSS)
    assert len(series(tabs, LOSS)) >= 6


def test_a_count_and_a_colon_without_a_tab_stays_a_rank_label() -> None:
    """`srun -l` puts `0: ` before every line: the task's rank, never a round."""
    line = parse("0: step 30 | loss: 2.5")
    assert line.step == 30


@pytest.mark.parametrize("n", LINES)
def test_a_quoted_name_is_the_values_own(n: int) -> None:
    """GluonTS: `Epoch[N] Evaluation metric 'epoch_loss'=..` is epoch N's train loss (one record an epoch), its
    `'validation_epoch_loss'` the eval's; the words before the quoted name label it, they do not name it."""
    lines = []
    for e in range(n):
        lines += [f"Epoch[{e}] Learning rate is 0.001", f"Epoch[{e}] Elapsed time {2.5:.3f} seconds",
                  f"Epoch[{e}] Evaluation metric 'epoch_loss'={_loss(e):f}"]
        if e % 4 == 3:
            lines.append(f"Epoch[{e}] Evaluation metric 'validation_epoch_loss'={_loss(e) + 0.5:f}")
    run = read_text("\n".join(lines) + "\n")
    loss = series(run, LOSS)
    assert sorted(loss) == list(range(n)) and loss[7] == pytest.approx(_loss(7))
    assert series(run, EVAL_LOSS)[7] == pytest.approx(_loss(7) + 0.5)


def _read_bytes(data: bytes, name: str) -> dict[int, float]:
    (run,) = read_bytes(data, name)
    return series(run, LOSS)


@pytest.mark.parametrize("name", ["metrics.csv", "train.log", "rounds.log"])
def test_a_utf8_byte_order_mark_is_no_part_of_the_first_line(name: str) -> None:
    """Windows PowerShell 5.1's `Out-File -Encoding utf8` writes a byte-order mark first: a CSV's first column is
    still `step` (the steps are its values, not the rows' numbers), a printed table's header (fastai's) still its
    header, a first line that heads a record with its count (CatBoost's) still a record."""
    if name == "metrics.csv":
        text, steps = "step,loss\n" + "".join(f"{i},{_loss(i)}\n" for i in range(10, 210, 10)), range(10, 210, 10)
    elif name == "train.log":
        text = "epoch     train_loss  valid_loss  time\n" + "".join(
            f"{i:<9d} {_loss(i):<11.4f} {_loss(i) + 0.1:<11.4f} 00:01\n" for i in range(1, 21))
        steps = range(1, 21)
    else:
        text, steps = "".join(f"{i}:\tlearn: {_loss(i):.7f}\ttest: {_loss(i):.7f}\n" for i in range(20)), range(20)
    loss = _read_bytes(b"\xef\xbb\xbf" + text.encode(), name)
    assert sorted(loss) == list(steps) and loss[steps[0]] == pytest.approx(_loss(steps[0]))
