"""The classes the fifth held-out grammar (`bench/log_grammar.py` HELD, forms in `bench/log_grammar_fifth.py`;
scored once, now spent) showed, one test per class: each log is read short (line by line) and long (a shape at
a time), and the series must hold what the trainer printed, at its steps."""

from __future__ import annotations

import pytest

from stethoscope.detect.names import recognize
from stethoscope.records import EVAL_LOSS, LOSS, STEP_TIME
from tests.importers.series import read_text, series

LINES = [12, 3000]


def _loss(i: int) -> float:
    return round(3 - i / 10_000, 4)


def test_a_loss_under_the_trained_models_name_is_the_loss() -> None:
    """Chainer's reporter names a value by the link it belongs to: `main/loss` is the trained model's loss,
    `validation/main/loss` its evaluation's; another link's loss (a GAN's `dis/loss`) stays unnamed."""
    assert recognize("main/loss").name == LOSS
    assert recognize("validation/main/loss").name == EVAL_LOSS
    assert recognize("dis/loss") is None


@pytest.mark.parametrize("n", LINES)
def test_a_console_loss_named_main_loss_is_read(n: int) -> None:
    run = read_text("".join(f"step {i}  main/loss: {_loss(i):.4f}\n" for i in range(0, 10 * n, 10)))
    loss = series(run, LOSS)
    assert sorted(loss) == list(range(0, 10 * n, 10)) and loss[10] == pytest.approx(_loss(10))


def _chainer(n: int, prefix: str = "") -> str:
    rows = [f"{prefix}epoch       iteration   main/loss   validation/main/loss  main/accuracy  elapsed_time"]
    for i in range(100, 100 * (n + 1), 100):
        rows.append(f"{prefix}{1 + i // 1000:<10g}  {i:<10g}  {_loss(i):<10g}  {0.5:<20g}  {0.9:<13g}  {i * 0.4:<12g}  ")
    return "\n".join(rows) + "\n"


@pytest.mark.parametrize("n", LINES)
def test_chainers_table_is_read_at_its_iterations(n: int) -> None:
    """PrintReport's table: the iteration column is the step (finer than the epoch); `main/loss` the loss."""
    run = read_text(_chainer(n))
    loss = series(run, LOSS)
    assert sorted(loss) == list(range(100, 100 * (n + 1), 100)) and loss[200] == pytest.approx(_loss(200))
    assert series(run, EVAL_LOSS)[200] == pytest.approx(0.5)


@pytest.mark.parametrize("prefix", ["2024-07-24T11:00:00.123456789Z stdout F ", "[1,mpirank:0,algo-1]<stdout>:",
                                    "(RayTrainWorker pid=23817, ip=10.0.0.12) ", "2024-07-24 11:00:00 INFO:root:",
                                    "[NeMo I 2024-07-24 11:20:33 nemo_logging:349] "])
def test_a_table_printed_through_a_logger_is_read_past_its_prefix(prefix: str) -> None:
    """A table's header and rows all carry what the console prints before every line (a date, a logger, a
    launcher's tag, glued or not): the columns start after it."""
    loss = series(read_text(_chainer(12, prefix)), LOSS)
    assert sorted(loss) == list(range(100, 1300, 100)) and loss[300] == pytest.approx(_loss(300))


def _fastai(n: int, between: str = "") -> str:
    rows = ["epoch     train_loss  valid_loss  accuracy  time    "]
    for e in range(n):
        rows.append(f"{e:<10}{_loss(e):<12.6f}{0.5:<12.6f}{0.9:<10.6f}00:12     ")
        if between and e % 3 == 1:
            rows.append(between.format(e=e))
    return "\n".join(rows) + "\n"


@pytest.mark.parametrize("bar", ["Evaluating:  50%|#####     | 50/100 [00:05<00:05, 9.{e}it/s]",
                                 "Loading checkpoint shards:  50%|█████     | 1/2 [00:0{e}<00:01,  1.2s/it]"])
def test_a_table_with_progress_bars_between_its_rows_is_the_table(bar: str) -> None:
    """fastai's epoch table with an eval's (or a loader's) bar between its rows: the bar reader claims the file
    and reads no step; the table is what it holds (each row's step its epoch: nothing finer is printed)."""
    loss = series(read_text(_fastai(12, bar)), LOSS)
    assert sorted(loss) == list(range(12)) and loss[4] == pytest.approx(_loss(4))


def _speechbrain(n: int, prefix: str = "", between: str = "") -> str:
    lines = []
    for e in range(1, n + 1):
        lines.append(f"{prefix}epoch: {e}, lr: 1.00e-03 - train loss: {_loss(e):.4f} - valid loss: 2.10, "
                     "valid error: 1.00e-01")
        if between and e % 3 == 1:
            lines.append(between)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("n", LINES)
def test_a_log_of_epoch_records_is_numbered_by_its_epochs(n: int) -> None:
    """SpeechBrain's train logger prints one line an epoch, the epoch before its train and valid losses and
    no finer counter: each record's step is its epoch (every line, not the first only); the valid loss on the
    same line is the eval's."""
    run = read_text(_speechbrain(n))
    loss = series(run, LOSS)
    assert sorted(loss) == list(range(1, n + 1)) and loss[3] == pytest.approx(_loss(3))
    assert series(run, EVAL_LOSS)[3] == pytest.approx(2.10)


@pytest.mark.parametrize("prefix", ["rank0: ", "node0/gpu0: ", "2024-07-24 11:00:00 UTC ",
                                    "2024-07-24T11:00:00.123456789Z stdout F ", "[1,mpirank:0,algo-1]<stdout>:"])
def test_an_epochs_key_keeps_the_words_of_a_prefix_not_shed(prefix: str) -> None:
    loss = series(read_text(_speechbrain(12, prefix)), LOSS)
    assert sorted(loss) == list(range(1, 13))


def test_epoch_records_with_bars_between_them_are_read() -> None:
    text = _speechbrain(12, between="Evaluating:  50%|#####     | 50/100 [00:05<00:05, 9.5it/s]")
    assert sorted(series(read_text(text), LOSS)) == list(range(1, 13))


def test_an_epoch_is_no_step_in_a_log_that_counts_steps() -> None:
    """A log whose records print a step counter: an epoch's summary line after them is not a record at the
    step of its epoch number."""
    lines = [f"step {i}  loss: {_loss(i):.4f}" for i in range(10, 200, 10)]
    lines.insert(10, "epoch: 1 - loss: 2.5")
    loss = series(read_text("\n".join(lines) + "\n"), LOSS)
    assert 1 not in loss and sorted(loss) == list(range(10, 200, 10))


def test_epoch_lines_without_a_loss_give_no_steps() -> None:
    """An epoch alone (a header, `epoch: 3, lr: 0.1`) is no record: such a log reads no point (refused)."""
    assert not read_text("".join(f"epoch: {e}, lr: 1.00e-03\n" for e in range(1, 13))).points


@pytest.mark.parametrize("after", ["(2.4100)", "(0.412 sec)"])
def test_a_bar_postfix_value_is_its_first_figure(after: str) -> None:
    """Levanter's bar: `train:  5%|▌ | 10/200 [00:04<01:17, 2.36it/s, loss=2.34 (2.41)]`: the loss is 2.34, the
    bracketed figure after it an average or a time."""
    lines = [f"train: {i // 2:>3}%|{'█' * (i // 20):<10}| {i}/200 [00:04<01:17, 2.36it/s, loss={_loss(i):.4f} {after}]"
             for i in range(10, 200, 10)]
    loss = series(read_text("\n".join(lines) + "\n"), LOSS)
    assert sorted(loss) == list(range(10, 200, 10)) and loss[20] == pytest.approx(_loss(20))


def test_epoch_records_of_a_cross_entropy_are_numbered_by_their_epochs() -> None:
    """An epoch record whose loss is named by its maths (`xent: 4.62`, no loss named) is an epoch's record too."""
    text = "".join(f"epoch: {e}, lr: 1.00e-03 - xent: {_loss(e):.4f} - valid loss: 3.31\n" for e in range(1, 13))
    loss = series(read_text(text), LOSS)
    assert sorted(loss) == list(range(1, 13)) and loss[2] == pytest.approx(_loss(2))


@pytest.mark.parametrize("n", LINES)
def test_a_time_in_brackets_after_the_step_counter_covers_the_steps_since_the_last_record(n: int) -> None:
    """TensorFlow's LoggingTensorHook (every_n_iter=100): `loss = 2.3, step = 1000 (41.234 sec)` is the time of
    the 100 steps since the last line: 0.412 s a step, not 41 s. A time after the loss, not the counter (the
    MNIST tutorial's `Step 100: loss = 2.30 (0.012 sec)`), is one step's."""
    lines = [f"INFO:tensorflow:loss = {_loss(s // 100)}, step = {s} (41.234 sec)" for s in range(100, 100 * n + 1, 100)]
    run = read_text("\n".join(lines) + "\n")
    assert series(run, STEP_TIME)[300] == pytest.approx(0.41234) and 100 not in series(run, STEP_TIME)
    assert series(run, LOSS)[300] == pytest.approx(_loss(3))
    tutorial = "".join(f"Step {s}: loss = {_loss(s):.4f} (0.012 sec)\n" for s in range(100, 100 * n + 1, 100))
    assert series(read_text(tutorial), STEP_TIME)[300] == pytest.approx(0.012)
