"""Units after a value, rates under any name and eval lines of any shape (issue 26): each log is read line by
line (short) and a shape at a time (long), and the series must hold what the trainer printed."""

from __future__ import annotations


import pytest

from stethoscope.records import DATA_WAIT, EVAL_LOSS, LOSS, SAMPLES_PER_S, STEP_TIME, TOKENS_PER_S
from tests.importers.series import names, read_text, series

LINES = [40, 3000]


def _time(i: int) -> float:
    return 0.4 + (i % 5) / 100


@pytest.mark.parametrize("n", LINES)
def test_a_cost_in_seconds_is_a_time_and_a_rate_unit_names_the_rate(n: int) -> None:
    """PaddleOCR: `avg_reader_cost: 0.01 s, avg_batch_cost: 0.41 s, ips: 153.3 samples/s`: the batch's cost is
    the step time, the reader's the data wait, `ips` in samples/s the throughput."""
    text = "".join(f"[2026/11/27 10:00:00] ppocr INFO: epoch: [1/10], global_step: {i}, lr: 0.001000, loss: "
                   f"{3 - i / n:.6f}, avg_reader_cost: 0.01000 s, avg_batch_cost: {_time(i):.5f} s, avg_samples: "
                   f"64.0, ips: {64 / _time(i):.1f} samples/s\n" for i in range(1, n + 1))
    run = read_text(text)
    times = series(run, STEP_TIME)
    assert sorted(times) == list(range(1, n + 1)) and times[3] == pytest.approx(_time(3))
    assert series(run, DATA_WAIT)[5] == pytest.approx(0.01)
    assert series(run, SAMPLES_PER_S)[3] == pytest.approx(64 / _time(3), abs=0.1)


@pytest.mark.parametrize("n", LINES)
def test_a_key_after_a_value_is_the_next_metric_not_the_values_unit(n: int) -> None:
    """`loss=4.2267 samples/sec=153.26`: `samples/sec=` is a metric of its own, not the loss's unit."""
    run = read_text("".join(f"[iter {i}/{n}] loss={3 - i / n:.4f} samples/sec={153 + i % 7:.2f}\n"
                        for i in range(1, n + 1)))
    assert series(run, LOSS)[2] == pytest.approx(3 - 2 / n, abs=1e-4)
    assert series(run, SAMPLES_PER_S)[2] == pytest.approx(155)
    assert not any("samples/sec" in name for name in names(run))


def test_a_time_unit_before_an_assignment_is_a_key_too() -> None:
    run = read_text("".join(f"step {i} loss {3 - i / 40:.3f} ms: 5\n" for i in range(1, 41)))
    assert series(run, LOSS)[1] == pytest.approx(2.975)


@pytest.mark.parametrize("n", LINES)
def test_an_eval_word_heading_a_line_without_a_step_makes_its_metrics_evals(n: int) -> None:
    """ESPnet: `3epoch results: [valid] loss=1.247, acc=0.5, time=10 seconds` after its train lines."""
    lines = []
    for i in range(1, n + 1):
        lines.append(f"[host] 2026-11-27 10:00:00,000 (trainer:732) INFO: 1epoch:train:{i}-{i}batch: "
                     f"iter_time=1.2e-04, loss={3 - i / n:.3f}, train_time={_time(i):.3f}\n")
        if i % 10 == 0:
            lines.append(f"[host] 2026-11-27 10:00:00,000 (trainer:338) INFO: 1epoch results: [valid] "
                         f"loss={2 + i / n:.3f}, acc=0.5, time=10 seconds\n")
    run = read_text("".join(lines))
    evals = series(run, EVAL_LOSS)
    assert sorted(evals) == list(range(10, n + 1, 10)) and evals[20] == pytest.approx(2 + 20 / n, abs=1e-3)
    assert series(run, LOSS)[20] == pytest.approx(3 - 20 / n, abs=1e-3)


@pytest.mark.parametrize("n", LINES)
def test_of_two_step_times_on_a_line_the_larger_is_the_steps(n: int) -> None:
    """ESPnet's `iter_time` (the wait on the data iterator) is a part of `train_time` (the whole step)."""
    run = read_text("".join(f"[host] 2026-11-27 10:00:00,000 (trainer:732) INFO: 1epoch:train:{i}-{i}batch: "
                        f"iter_time={1.2e-4 + (i % 3) * 1e-5:.2e}, loss={3 - i / n:.3f}, train_time={_time(i):.3f}\n"
                        for i in range(1, n + 1)))
    times = series(run, STEP_TIME)
    assert len(times) == n and times[3] == pytest.approx(_time(3))
    assert series(run, "iter_time")[3] == pytest.approx(1.2e-4)



@pytest.mark.parametrize("n", LINES)
def test_a_count_of_updates_is_the_step_and_frames_per_second_a_throughput(n: int) -> None:
    """Stable-Baselines3's table on one line: `n_updates` counts the updates made (the step), `fps` is a rate."""
    run = read_text("".join(f"| time/ | total_timesteps {64 * i} | train/ | loss {3 - i / n:.4g} | n_updates {i} | "
                        f"fps {150 + i % 9} |\n" for i in range(1, n + 1)))
    assert sorted(series(run, LOSS)) == list(range(1, n + 1))
    assert series(run, SAMPLES_PER_S)[4] == 154


def test_an_abbreviated_rate_name_and_a_unit_spelled_as_the_key() -> None:
    """`tput: 5000 tok/s` is a throughput; in `s/it: 0.41` the unit is the key, not the step counter's unit."""
    run = read_text("".join(f"step {i} | tput: {5000 + i} tok/s | s/it: {_time(i):.2f} | loss {3 - i / 40:.3f}\n"
                        for i in range(1, 41)))
    assert series(run, TOKENS_PER_S)[3] == 5003
    assert series(run, STEP_TIME)[3] == pytest.approx(_time(3))
