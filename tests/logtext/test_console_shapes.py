"""Console shapes of real trainers the reader once misread (issue 26 point 3): counters without a counter
word (t5x's `[N]`, torchtune's `E|N|`, ESPnet's glued `3epoch:train:1-100batch`), losses under the names of
their maths or of the value printed (`xent`, `ppl`, `step_loss`), a rate of steps as the step time and a
cumulative clock (OpenNMT's `N sec`) never read as one. Each is read line by line (a short log) and a shape
at a time (a long one, the fast paths)."""

from __future__ import annotations

import math

import pytest

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers.base import ImportedRun
from stethoscope.logtext.names import metric
from stethoscope.records import LOSS, STEP_TIME
from tests.importers.series import read_text, series

LINES = [40, 3000]  # a short log (line by line) and a long one (read a shape at a time)
NAN_FROM = 0.6  # the loss is NaN from this fraction of the log on


def _loss(i: int, n: int) -> float:
    return float("nan") if i >= NAN_FROM * n else 3 * math.exp(-i / 250) + 1.2 + (i % 7) * 0.01


def _check_loss(run: ImportedRun, n: int, steps: list[int] | None = None) -> None:
    got = series(run, LOSS)
    steps = steps or list(range(1, n + 1))
    assert sorted(got) == steps, sorted(got)[:10]
    first_nan = min(s for s, v in got.items() if math.isnan(v))
    assert first_nan == steps[math.ceil(NAN_FROM * n) - 1]


@pytest.mark.parametrize("n", LINES)
def test_a_bracketed_count_after_an_absl_prefix_is_the_step_and_steps_per_second_the_step_time(n: int) -> None:
    text = "".join(f"I1127 10:00:{i % 60:02d}.000000 139 train.py:42] [{i}] train/loss={_loss(i, n):.4f}, "
                   f"train/learning_rate=0.001, timing/steps_per_second={2.5 + (i % 3) * 0.01:.2f}\n"
                   for i in range(1, n + 1))
    run = read_text(text)
    _check_loss(run, n)
    times = series(run, STEP_TIME)
    assert len(times) == n and all(abs(t - 0.4) < 0.01 for t in times.values())  # 1 / 2.5 steps/s


@pytest.mark.parametrize("n", LINES)
def test_counts_heading_a_line_between_pipes_are_the_epoch_and_the_step(n: int) -> None:
    run = read_text("".join(f"{1 + i // 500}|{i}|Loss: {_loss(i, n)}\n" for i in range(1, n + 1)))
    _check_loss(run, n)


@pytest.mark.parametrize("n", LINES)
def test_a_count_glued_before_its_counter_word_is_the_step_and_its_epoch_restarts_it(n: int) -> None:
    per_epoch = 500
    text = "".join(f"[host] 2026-11-27 10:00:00,000 (trainer:732) INFO: {1 + (i - 1) // per_epoch}epoch:train:"
                   f"{(i - 1) % per_epoch + 1}-{(i - 1) % per_epoch + 1}batch: forward_time=0.1, "
                   f"loss={_loss(i, n):.3f}, lr_0=1.0e-04, train_time=0.412\n" for i in range(1, n + 1))
    run = read_text(text)
    _check_loss(run, n)  # epoch e's batch b is step (e - 1) * 500 + b: the steps stay in order
    assert "trainer" not in {p.name for p in run.points}  # `(trainer:732)`: the logger's source line


@pytest.mark.parametrize("n", LINES)
def test_opennmt_cross_entropy_is_the_loss_and_its_elapsed_seconds_no_step_time(n: int) -> None:
    text = "".join(f"[2026-11-27 10:00:{i % 60:02d},123 INFO] Step {i}/ {n}; acc: 20.5; ppl: {math.exp(_loss(i, n)):.2f}; "
                   f"xent: {_loss(i, n):.4f}; lr: 0.00100; sents: 2000; bsz: 1000/1000/64; 3000/2000 tok/s; "
                   f"{int(i * 0.4)} sec\n" for i in range(1, n + 1))
    run = read_text(text)
    _check_loss(run, n)
    assert series(run, LOSS)[5] == pytest.approx(_loss(5, n), abs=1e-4)  # the xent, not log(ppl)
    times = list(series(run, STEP_TIME).values())
    assert times and max(times) <= 0.5 + 1e-9  # ticks of the clock over the steps between: never its 2..N s
    drops = [f for f in diagnose_run(run).findings if f.type.startswith("throughput")]
    assert not drops, drops


@pytest.mark.parametrize("n", LINES)
def test_a_perplexity_alone_gives_the_loss_as_its_log(n: int) -> None:
    run = read_text("".join(f"step {i} | ppl {math.exp(_loss(i, n)):.4f} | lr 3e-4\n" for i in range(1, n + 1)))
    _check_loss(run, n)
    assert series(run, LOSS)[10] == pytest.approx(_loss(10, n), abs=1e-4)


def test_a_named_loss_wins_over_its_maths() -> None:
    run = read_text("".join(f"step {i} | loss {2 + i / 100:.3f} | xent {1 + i / 100:.3f} | ppl 9.0\n" for i in range(1, 50)))
    assert series(run, LOSS)[10] == pytest.approx(2.1)


@pytest.mark.parametrize("raw", ["step_loss", "avr_loss", "avg_loss", "loss_step", "running_loss", "batch_loss"])
def test_the_value_of_the_train_loss_a_trainer_prints_is_the_loss(raw: str) -> None:
    assert metric(raw).name == LOSS


def test_a_progress_bar_step_loss_is_the_loss() -> None:
    text = "".join(f"Steps:  {i / 10:.0f}%|##  | {i}/1000 [00:{i % 60:02d}<04:30, 2.50it/s, lr=0.0001, "
                   f"step_loss={_loss(i, 1000):.3f}]\n" for i in range(1, 1001))
    _check_loss(read_text(text), 1000)


@pytest.mark.parametrize("first", [0, 400])  # from the start, and an excerpt of a longer log
def test_a_clock_in_whole_seconds_is_never_a_step_time(first: int) -> None:
    """A clock printed coarser than a step (0.4 s steps, whole seconds) rises on some records only."""
    run = read_text("".join(f"Step {1000 + i}/2000; xent: 2.5; {first + int(0.4 * i)} sec\n" for i in range(12)))
    times = list(series(run, STEP_TIME).values())
    assert all(t <= 0.5 + 1e-9 for t in times), times


@pytest.mark.parametrize("kv", [": ", "=", " "])
def test_a_bracketed_count_after_a_file_line_logger_is_the_step(kv: str) -> None:
    run = read_text("".join(f"07/24 11:00:{i:02d} INFO train.py:80] [{5 * i}] | lm loss{kv}{3 - i / 100:.3f}\n" for i in range(30)))
    assert sorted(series(run, LOSS)) == [5 * i for i in range(30)]


@pytest.mark.parametrize("n", LINES)
def test_running_averages_in_brackets_that_repeat_the_units_are_side_figures(n: int) -> None:
    """timm: `Time: 0.401s, 640.00/s (0.393s, 600.00/s)`: the bracket repeats the units before it, in order (the
    running averages); the step time is the record's own, once per record; `Train: 3` before the counter is the epoch."""
    text = "".join(f"Train: 3 [{i:>4d}/{n} ({100 * i // n:>2d}%)]  Loss: {_loss(i, n):#.3g} (4.23)  Time: "
                   f"{0.4 + (i % 5) / 1000:.3f}s,  640.00/s  (0.350s,  600.00/s)  LR: 1.000e-04  Data: 0.012 (0.015)\n"
                   for i in range(1, n + 1))
    run = read_text(text)
    times = [p for p in run.points if p.name == STEP_TIME]
    assert len(times) == n and all(0.4 <= p.value <= 0.405 for p in times)
    epochs = series(run, "train/epoch")  # (its steps: epoch 3's batches, 3 * n + i, as timm numbers its updates)
    assert set(epochs.values()) == {3} and len(epochs) == n and not {p.name for p in run.points} & {"s", "/s", "train"}


def test_a_clock_never_falls_and_a_step_time_hovers() -> None:
    from stethoscope.detect.step_time_alias import CLOCK, STEP, judge_times

    assert judge_times([0, 2, 4], 1.0)[0] == CLOCK  # from 0: a step takes time
    assert judge_times([400, 400, 401, 401, 402, 402, 402, 403], 1.0)[0] == CLOCK  # whole seconds, an excerpt
    assert judge_times([0.41, 0.40, 0.42, 0.40, 0.43, 0.41, 0.40, 0.42], 1.0)[0] == STEP
    assert judge_times([0.40, 0.40, 0.40, 0.40, 0.40, 0.40, 0.40, 0.40], 1.0)[0] == STEP  # level: never rises
