"""The misreads the fourth held-out grammar (`bench/log_grammar.py` HELD, now spent) showed, one test per class,
and four reader bugs found before it: each log is read line by line (short) and a shape at a time (long), and
the series must hold what the trainer printed, at its steps."""

from __future__ import annotations

import pytest

from stethoscope.records import EVAL_LOSS, LOSS, MFU, SAMPLES_PER_S, STEP_TIME
from tests.importers.series import names, read_text, series

LINES = [40, 3000]
DATA_WAIT_FRACTION = "perf/data_wait_frac"  # as tests/detect/test_names.py reads torchtitan's data_loading(%)


def _loss(i: int) -> float:
    return round(3 - i / 10_000, 4)


@pytest.mark.parametrize("n", LINES)
def test_a_test_splits_batches_are_an_eval_not_training_steps(n: int) -> None:
    """torchvision's reference scripts: `Test:   [10/50]  ... loss: 0.91 (0.93)` counts the eval's own batches;
    its loss is the evaluation's, at the training step before it, never a training step of its own."""
    lines = []
    for i in range(0, n, 10):
        lines.append(f"Epoch: [0]  [{i:>4}/{n}]  eta: 0:10:00  lr: 0.0001  loss: {_loss(i):.4f} ({_loss(i):.4f})"
                     f"  time: 0.4012  data: 0.0102  max mem: 2547")
        if i % 50 == 20:
            lines.append(f"Test:   [{i % 50:>2}/50]  eta: 0:00:01  loss: 0.9100 (0.9300)  acc1: 78.1250 (78.1250)"
                         "  time: 0.1012  data: 0.0512  max mem: 2547")
    run = read_text("\n".join(lines) + "\n")
    loss = series(run, LOSS)
    assert sorted(loss) == list(range(0, n, 10)) and loss[20] == pytest.approx(_loss(20))
    assert series(run, EVAL_LOSS)[20] == pytest.approx(0.91)


@pytest.mark.parametrize("n", LINES)
def test_a_report_for_a_step_is_that_steps_evaluation(n: int) -> None:
    """TensorFlow's estimator: `Saving dict for global step 100: accuracy = 0.91, global_step = 100, loss = 0.3`
    reports the evaluation run at step 100: its loss is an eval loss, not a second train loss there."""
    lines = []
    for i in range(100, 100 * n + 1, 100):
        lines.append(f"INFO:tensorflow:loss = {_loss(i // 100)}, step = {i} (41.234 sec)")
        if i % 1000 == 0:
            lines.append(f"INFO:tensorflow:Saving dict for global step {i}: accuracy = 0.91, global_step = {i}, "
                         "loss = 0.3")
    run = read_text("\n".join(lines) + "\n")
    assert series(run, LOSS)[1000] == pytest.approx(_loss(10))
    assert series(run, EVAL_LOSS)[1000] == pytest.approx(0.3)


@pytest.mark.parametrize("n", LINES)
def test_a_bracketed_count_after_an_epoch_word_is_the_epoch(n: int) -> None:
    """torchvision's `Epoch: [3] Total time: 0:00:05 (0.9880 s / it)` closes epoch 3: `[3]` is no step."""
    lines = [f"[{i}] loss={_loss(i)}" for i in range(100, 100 + n)]
    lines.insert(len(lines) // 2, "Epoch: [3] Total time: 0:00:05 (0.9880 s / it)")
    run = read_text("\n".join(lines) + "\n")
    assert min(series(run, LOSS)) == 100 and 3 not in {p.step for p in run.points}


@pytest.mark.parametrize("key", ["nll-loss", "ce_loss", "cross_entropy_loss"])
def test_a_loss_named_by_its_maths_is_the_loss(key: str) -> None:
    """MXNet's `nll-loss=2.30`: a loss named by what it computes is the train loss (and `val_` makes it the
    eval's)."""
    run = read_text("".join(f"step {i}  {key}={_loss(i)}  val_{key}={_loss(i) + 1}\n" for i in range(40)))
    assert series(run, LOSS)[7] == pytest.approx(_loss(7))
    assert series(run, EVAL_LOSS)[7] == pytest.approx(_loss(7) + 1)


@pytest.mark.parametrize("n", LINES)
def test_a_range_of_batches_is_counted_by_its_end(n: int) -> None:
    """MXNet's Speedometer: `Batch [20-40]` is the batches since the last line; the counter is 40."""
    run = read_text("".join(f"INFO:root:Batch [{max(i - 20, 0)}-{i}]\tSpeed: 1234.56 samples/sec\t"
                            f"nll-loss={_loss(i)}\n" for i in range(0, 20 * n, 20)))
    loss = series(run, LOSS)
    assert sorted(loss) == list(range(0, 20 * n, 20)) and loss[40] == pytest.approx(_loss(40))
    assert series(run, SAMPLES_PER_S)[40] == pytest.approx(1234.56)


@pytest.mark.parametrize("n", LINES)
def test_a_log_level_is_no_word_of_a_key(n: int) -> None:
    """ColossalAI's rich logger: `INFO     colossalai - colossalai - INFO: iter_dt 248.81ms; iter 10: train loss
    2.3`: the level after the logger's name heads the message, it is not part of the first key."""
    run = read_text("".join(f"[07/24/24 11:20:33] INFO     colossalai - colossalai - INFO: iter_dt 248.81ms; "
                            f"iter {i}: train loss {_loss(i)}\n" for i in range(n)))
    assert series(run, LOSS)[5] == pytest.approx(_loss(5))
    assert series(run, STEP_TIME)[5] == pytest.approx(0.24881)


@pytest.mark.parametrize("n", LINES)
def test_horovods_rank_tag_and_a_bare_counter_after_a_pipe(n: int) -> None:
    """horovod's gloo launcher tags a line `[0]<stdout>:` (mpirun's `[1,0]<stdout>:`); torchtune's `1|500|` and
    t5x's `[500]` head the message after a `LEVEL | ` prefix too."""
    run = read_text("".join(f"[0]<stdout>:2024-07-24 11:50:00,000 INFO | 1|{i}|, train/loss = {_loss(i)}\n"
                            f"[1]<stdout>:2024-07-24 11:50:00,000 INFO | 1|{i}|, train/loss = 9.9\n"
                            for i in range(100, 100 + n)))
    assert series(run, LOSS) == {i: pytest.approx(_loss(i)) for i in range(100, 100 + n)}
    run = read_text("".join(f"[2024-07-24 11:50:00,000] INFO | [{i}]\tLoss/train:{_loss(i)}\n"
                            for i in range(100, 100 + n)))
    assert series(run, LOSS)[101] == pytest.approx(_loss(101))


# -- reader bugs found before the fourth part was drawn -------------------------------------------------------
@pytest.mark.parametrize("n", LINES)
def test_a_rate_unit_before_a_number_is_that_numbers_key(n: int) -> None:
    """`loss 4.2 samples/sec 153` (single blanks between keys and values): `samples/sec` names 153, it is not
    the loss's unit."""
    run = read_text("".join(f"step {i} loss {_loss(i)} samples/sec {150 + i % 7}\n" for i in range(n)))
    assert series(run, LOSS)[3] == pytest.approx(_loss(3))
    assert series(run, SAMPLES_PER_S)[3] == pytest.approx(153)
    assert not any("samples/sec" in name for name in names(run))


@pytest.mark.parametrize("n", LINES)
def test_a_stepless_line_with_a_train_loss_is_no_eval(n: int) -> None:
    """`loss=0.5 val_loss=0.7` without a step: its train loss is not an eval loss (only `val_loss` is one)."""
    lines = [f"step {i} loss: {_loss(i)}" for i in range(n)]
    lines.insert(21, "loss=0.5 val_loss=0.7")
    run = read_text("\n".join(lines) + "\n")
    evals = [(p.step, p.value) for p in run.points if p.name == EVAL_LOSS]
    assert evals == [(20, pytest.approx(0.7))]  # the eval's at the step before; its train loss is not an eval's
    assert series(run, LOSS)[20] == pytest.approx(_loss(20))


@pytest.mark.parametrize("n", LINES)
def test_a_percent_sign_after_a_key_is_its_unit(n: int) -> None:
    """`data_wait% 5` is 5 %, as `data_wait: 5%` and `data_wait(%): 5` are: a fraction of 0.05; `mfu% 41` is 41 %."""
    run = read_text("".join(f"step {i} loss: {_loss(i)} data_wait% 5 mfu% 41\n" for i in range(n)))
    assert series(run, DATA_WAIT_FRACTION)[3] == pytest.approx(0.05)
    assert series(run, MFU)[3] == pytest.approx(0.41)


def _timm(epochs: list[int], per: int = 1251, every: int = 100) -> list[str]:
    return [f"Train: {e} [{b:>4}/{per} ({100 * b / (per - 1):>3.0f}%)]  Loss: {_loss(b):.4f} (4.3000)  Time: 0.401s,"
            f"  640.00/s  (0.393s,  600.00/s)  LR: 1.000e-03  Data: 0.012 (0.015)"
            for e in epochs for b in [*range(0, per - 1, every), per - 1]]


@pytest.mark.parametrize("epochs", [[3, 4], list(range(1, 40))])
def test_timms_counter_of_batches_makes_steps_with_its_epoch(epochs: list[int]) -> None:
    """timm's `Train: 3 [ 100/1251 (  8%)]` counts batches: its last line of an epoch is `[1250/1251 (100%)]`, an
    index at its total - 1 (a count of samples ends below its total). The step is the epochs' batches so far
    plus the counter, not the record's number in the file; its epochs count from 0, so a log that starts in a later
    epoch (a resumed run's) counts the epochs before it: epoch E's batch b is step E * 1251 + b (timm's num_updates)."""
    run = read_text("\n".join(_timm(epochs)) + "\n")
    loss, first = series(run, LOSS), epochs[0] * 1251
    assert loss[first + 100] == pytest.approx(_loss(100)) and loss[first + 1251 + 1250] == pytest.approx(_loss(1250))
    assert len(loss) == 14 * len(epochs) and not any("file order" in w for w in run.warnings)


def test_a_sample_counter_stays_numbered_in_file_order_until_it_shows_an_index() -> None:
    """Before an epoch's last line, `[100/1251 (8%)]` may count samples (PyTorch's MNIST example
    `[640/60000 (1%)]`): its records are numbered 1, 2, 3 … in file order, as before."""
    run = read_text("\n".join(_timm([3])[:10]) + "\n")
    assert sorted(series(run, LOSS)) == list(range(1, 11))
    mnist = "".join(f"Train Epoch: {1 + s // 30} [{(s % 30) * 640}/19200 ({100 * (s % 30) // 30}%)]\tLoss: "
                    f"{_loss(s):.6f}\n" for s in range(0, 90, 10))
    assert sorted(series(read_text(mnist), LOSS)) == list(range(1, 10))


@pytest.mark.parametrize("n", LINES)
def test_a_counter_within_epochs_without_a_total_keeps_its_logging_interval(n: int) -> None:
    """MXNet's `Epoch[1] Batch [4-14]` restarts each epoch and prints no epoch length: the interval the trainer
    logs at goes on over the epoch's end (steps 50, 60 …), so the steps stay the trainer's own, in order."""
    per_epoch, lines = 56, []
    for step in range(0, 10 * n, 10):
        batch = step % per_epoch
        lines.append(f"INFO:root:Epoch[{step // per_epoch}] Batch [{max(batch - 10, 0)}-{batch}]\tSpeed: 1234.56 "
                     f"samples/sec\tnll-loss={_loss(step)}")
    loss = series(read_text("\n".join(lines) + "\n"), LOSS)
    assert sorted(loss) == list(range(0, 10 * n, 10)) and loss[60] == pytest.approx(_loss(60))


@pytest.mark.parametrize("n", LINES)
def test_a_loggers_level_head_is_no_word_of_a_key_wherever_it_stands(n: int) -> None:
    """Python logging's `INFO:tensorflow:` after a tag the line did not shed (`node0/gpu0: [date] `): the logger's
    name is the prefix's, not the first word of the loss's key (`tensorflow Train Loss`)."""
    run = read_text("".join(f"node0/gpu0: [07/24/24 11:00:00] INFO:tensorflow:Train Loss {_loss(i)}, step = {i} "
                            "(21.329 sec)\n" for i in range(100, 100 * n + 1, 100)))
    assert series(run, LOSS)[200] == pytest.approx(_loss(200))
