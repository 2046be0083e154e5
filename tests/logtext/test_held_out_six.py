"""The classes the sixth held-out grammar (`bench/log_grammar.py` HELD, forms in `bench/log_grammar_sixth.py`;
scored once, now spent) showed, one test per class: each log is read short (line by line) and long (a shape at
a time), and the series must hold what the trainer printed, at its steps."""

from __future__ import annotations

import pytest

from stethoscope.detect.names import recognize
from stethoscope.records import EVAL_LOSS, LOSS
from tests.importers.series import read_text, series

LINES = [12, 3000]


def _loss(i: int) -> float:
    return round(3 - i / 10_000, 4)


def test_the_cost_is_the_loss_and_a_batchs_cost_is_not() -> None:
    """Marian prints its objective as `Cost`; PaddlePaddle's `batch_cost`, `reader_cost` are times."""
    assert recognize("Cost").name == LOSS
    assert recognize("valid cost").name == EVAL_LOSS
    for name in ("batch_cost", "avg_batch_cost", "reader_cost", "data_cost"):
        assert recognize(name) is None or recognize(name).name != LOSS


@pytest.mark.parametrize("n", LINES)
def test_marians_updates_are_the_step(n: int) -> None:
    """`Ep. 1 : Up. 1000 : Sen. 64,000 : Cost 4.23 : ...`: the updates (`Up.`) count the steps, the sentences
    (`Sen.`, within the epoch) are samples, the cost is the loss; its `[valid]` line is the eval's at `Up.`."""
    lines = []
    for i in range(10, 10 * (n + 1), 10):
        lines.append(f"[2024-07-24 11:20:{i % 60:02d}] Ep. {1 + i // 500} : Up. {i} : Sen. {(i % 500 + 1) * 64:,d} : "
                     f"Cost {_loss(i):.8f} : Time 12.34s : 12345.67 words/s : gNorm 0.5432 : L.r. 3.0000e-04")
        if i % 50 == 0:
            lines.append(f"[2024-07-24 11:20:{i % 60:02d}] [valid] Ep. {1 + i // 500} : Up. {i} : cross-entropy : "
                         f"{_loss(i) + 0.5:.5f} : new best")
    run = read_text("\n".join(lines) + "\n")
    loss = series(run, LOSS)
    assert sorted(loss) == list(range(10, 10 * (n + 1), 10)) and loss[20] == pytest.approx(_loss(20))
    assert series(run, EVAL_LOSS)[50] == pytest.approx(_loss(50) + 0.5)


def _olmo(n: int, tag: str = "") -> str:
    out = []
    for i in range(10, 10 * (n + 1), 10):
        out += [f"{tag}2024-07-24 11:20:33 INFO olmo.train:816 [step={i}/739328]",
                f"{tag}    train/CrossEntropyLoss={_loss(i):.3f} ({_loss(i) + 0.01:.3f})",
                f"{tag}    throughput/total_tokens={i * 4_194_304:,d}", f"{tag}    train/Perplexity={2.718 ** _loss(i):.2f}"]
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("n", LINES)
@pytest.mark.parametrize("tag", ["", "[rank0]:", "node0/gpu0: ", "(RayTrainWorker pid=1, ip=10.0.0.1) ", "trainer-1  | "])
def test_a_record_of_indented_metric_lines_belongs_to_its_header(n: int, tag: str) -> None:
    """OLMo logs `[step=N/M]` and then one `    name=value` line a metric, indented by blanks (a launcher's tag
    before each line): those lines are the step's record, read as printed (not the loss from the perplexity)."""
    loss = series(read_text(_olmo(n, tag)), LOSS)
    assert sorted(loss) == list(range(10, 10 * (n + 1), 10)) and loss[20] == pytest.approx(round(_loss(20), 3))


@pytest.mark.parametrize("n", LINES)
def test_a_count_in_brackets_before_a_date_labels_the_process(n: int) -> None:
    """MPICH's `mpiexec -l` puts `[0] ` before every line: before a date, a logger or an indent it is the rank,
    never step 0 (an eval line or a record's continuation line has no counter of its own)."""
    lines = []
    for i in range(10, 10 * (n + 1), 10):
        lines.append(f"[0] Wed Jul 24 11:50:00 2024 [INFO] - step {i} | loss: {_loss(i):.4f}")
        if i % 50 == 0:
            lines.append(f"[0] Wed Jul 24 11:50:01 2024 [INFO] - Validation loss: {_loss(i) + 0.5:.4f}")
    run = read_text("\n".join(lines) + "\n")
    assert sorted(series(run, LOSS)) == list(range(10, 10 * (n + 1), 10))
    assert 0 not in series(run, EVAL_LOSS) and series(run, EVAL_LOSS)[50] == pytest.approx(_loss(50) + 0.5)
    olmo = series(read_text(_olmo(n, "[0] ")), LOSS)
    assert sorted(olmo) == list(range(10, 10 * (n + 1), 10))


def test_a_bracketed_step_heading_the_metrics_stays_a_step() -> None:
    """t5x after its absl prefix: `[500] train/loss=2.5` (no date, logger or indent after the count)."""
    run = read_text("".join(f"[{i}] train/loss={_loss(i):.4f}\n" for i in range(100, 1300, 100)))
    assert sorted(series(run, LOSS)) == list(range(100, 1300, 100))


def _nnunet(n: int) -> str:
    out = []
    for e in range(n):
        at = f"2024-07-24 11:{e % 60:02d}:00.{e:06d}: "
        out += [at, f"{at}Epoch {e}", f"{at}Current learning rate: 0.00991", f"{at}train_loss {-_loss(e) / 5:.4f}",
                f"{at}val_loss {-_loss(e) / 4:.4f}", f"{at}Pseudo dice [0.7171, 0.5891]", f"{at}Epoch time: 131.04 s"]
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("n", LINES)
def test_an_epoch_line_alone_heads_the_values_printed_after_it(n: int) -> None:
    """nnU-Net prints `Epoch 3` on a line of its own, then one value a line (`train_loss -0.2157`: a dice loss,
    negative): in a log with no finer counter the train loss after it is that epoch's, its val_loss the eval's."""
    run = read_text(_nnunet(n))
    loss = series(run, LOSS)
    assert sorted(loss) == list(range(n)) and loss[2] == pytest.approx(-_loss(2) / 5, abs=1e-4)
    assert series(run, EVAL_LOSS)[2] == pytest.approx(-_loss(2) / 4, abs=1e-4)


def test_an_epoch_header_does_not_number_a_log_that_counts_steps() -> None:
    """Keras' `Epoch 2/10` before its bars: the bars' counters are the steps (a guard)."""
    lines = []
    for e in range(1, 4):
        lines.append(f"Epoch {e}/3")
        lines += [f"{b}/5 [======] - ETA: 0s - loss: {_loss(b):.4f}" for b in range(1, 6)]
    run = read_text("\n".join(lines) + "\n")
    assert len(series(run, LOSS)) >= 5 and not set(series(run, LOSS)) <= {1, 2, 3}


def _sb3(n: int, tag: str = "") -> str:
    out = [f"{tag}Using cuda device"]
    for k in range(1, n + 1):
        rows = [("rollout/", ""), ("ep_rew_mean", "-1.2e+03"), ("time/", ""), ("fps", "1024"), ("iterations", f"{k}"),
                ("total_timesteps", f"{2048 * k}"), ("train/", ""), ("entropy_loss", "-1.38"), ("loss", f"{_loss(k):.3g}"),
                ("n_updates", f"{10 * k}"), ("value_loss", f"{2 * _loss(k):.3g}")]
        out += [f"{tag}{'-' * 38}", *(f"{tag}| {key if key.endswith('/') else '    ' + key:<20} | {v:<11} |" for key, v in rows),
                f"{tag}{'-' * 38}"]
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("tag", ["", "[worker-0] ", "trainer-1  | "])
def test_a_box_of_name_value_rows_is_one_record_at_its_steps_done(tag: str) -> None:
    """Stable-Baselines3 logs a box of `| name | value |` rows a rollout: its step is `total_timesteps` (the axis
    it logs at; `iterations` and `n_updates` are other counters), `train/loss` the loss, `entropy_loss` not."""
    run = read_text(_sb3(40, tag))
    loss = series(run, LOSS)
    assert sorted(loss) == [2048 * k for k in range(1, 41)] and loss[4096] == pytest.approx(float(f"{_loss(2):.3g}"))


def test_entropy_alone_is_no_cross_entropy() -> None:
    assert recognize("train/entropy_loss") is None or recognize("train/entropy_loss").name != LOSS
    assert recognize("cross_entropy_loss").name == LOSS and recognize("train/loss").name == LOSS


@pytest.mark.parametrize("head", ["INFO:root:{i}iter:", "- root - INFO - [{i}]", "INFO:root:[{i:>4}/9000]",
                                  "[default0]:INFO:root:1epoch:train:0-{i}batch:"])
def test_a_counter_before_an_indent_is_no_tag(head: str) -> None:
    """A guard for the indented-metric rule: `0iter:  train/loss=3.6` (two blanks between the fields) counts its
    steps before the blanks; only a tag that counts nothing (`node0/gpu0:`, `(pid=1)`) is shed there."""
    run = read_text("".join(f"{head.format(i=i)}  train/loss={_loss(i):.4f}\n" for i in range(10, 130, 10)))
    assert sorted(series(run, LOSS)) == list(range(10, 130, 10))
