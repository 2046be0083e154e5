"""Misread classes of the twelfth grammar part and of real public logs (readers-17), each as a rule: a record
naming the counters of several components is numbered by the counter of the component whose loss it holds."""

from __future__ import annotations

import pytest

from stethoscope.errors import InputError
from stethoscope.records import LOSS
from tests.importers.series import read_text, series

_GLOG = "I1128 03:01:34.744386 140023579745408 terminal.py:91] "


def _learner(k: int, tag: str = "[Learner] ") -> str:
    return (f"{_GLOG}{tag}Actor Episodes = {4 * k} | Actor Steps = {8017 * k} | Learner Steps = {32 * k} | "
            f"Learner Walltime = {8.4 * k:.3f} | Loss = {1.0 + k / 100:.3f}\n")


def test_the_learner_record_is_numbered_by_the_learners_steps() -> None:
    """Before: the actor's frames (`Actor Steps = 8017`) were the step of the learner's loss."""
    run = read_text("".join(_learner(k) for k in range(1, 9)))
    assert series(run, LOSS) == {32 * k: round(1.0 + k / 100, 3) for k in range(1, 9)}


def test_the_actors_lines_are_no_records_of_the_run() -> None:
    """Before: `[Actor] .. Actor Steps = 9207 | Episode Return = ..` put the actor's values at steps 9207, .."""
    text = []
    for k in range(1, 9):
        text.append(f"iteration={k * 6 + 1} | train_mse {2.0 + k / 10:.4f} | examples/sec 279.5\n")
        if k % 2:
            text.append(f"{_GLOG}[Actor] Actor Episodes = {51 * k} | Actor Steps = {9207 * k} | Episode Length = 1000"
                        f" | Episode Return = 587.500 | Steps Per Second = 1073.900\n")
    run = read_text("".join(text))
    assert set(series(run, LOSS)) == {k * 6 + 1 for k in range(1, 9)}
    assert max(p.step for p in run.points) == 49


def test_several_components_counters_and_no_owner_named_is_refused() -> None:
    """Which counter numbers the loss is not said (no tag, the loss key unowned): no step rather than a wrong one."""
    with pytest.raises(InputError):
        read_text("".join(_learner(k, tag="") for k in range(1, 9)))


def test_the_run_counters_are_no_component() -> None:
    """A guard: `Train Steps`, `Global Steps` are the run's counter, not a component's."""
    run = read_text("".join(f"Train Steps = {10 * k} | lr = 0.001 | loss = {2.0 - k / 10:.2f}\n" for k in range(1, 6)))
    assert series(run, LOSS) == {10 * k: round(2.0 - k / 10, 2) for k in range(1, 6)}


def test_a_step_counter_ending_a_sentence() -> None:
    """Flax's examples: `Finished training step 100. Batch size: 512, Loss: ..`; before: no step read (the period)."""
    run = read_text("".join(f"{_GLOG}Finished training step {100 * k}. Batch size: 512, Loss: {8.0 - k / 10:.5f}, "
                            f"LR: 0.00044\n" for k in range(1, 8)))
    assert series(run, LOSS) == {100 * k: round(8.0 - k / 10, 5) for k in range(1, 8)}


def test_a_number_inside_a_key_is_no_value() -> None:
    """`mean@32: 0.51` was `mean` = 32 (0.51 lost); `G_Lp: 0.014G_gdl: 0.2` was 0.014 giga (1.4e7) under `G_Lp`."""
    run = read_text("".join(f"step {10 * k} | mean@32: 0.5{k} | recall@5=0.8 | loss: {2.0 - k / 10:.2f}\n"
                            for k in range(1, 8)))
    assert series(run, "mean@32")[10] == 0.51 and "mean" not in {p.name for p in run.points}
    run = read_text("".join(f"step {10 * k} loss: {2.0 - k / 10:.2f} G_Lp: 0.01{k}G_gdl: 0.2{k}D_loss: 0.5{k}\n"
                            for k in range(1, 8)))
    assert series(run, "g_lp")[10] == 0.011 and series(run, "g_gdl")[20] == 0.22


def test_an_episode_counter_heading_a_record_is_its_step() -> None:
    """`Episode 12 reward: 31.5, Episode loss: 0.42` was refused (no counter, the episode's loss unknown)."""
    run = read_text("".join(f"Episode {k} reward: {10 * k}.5, Episode loss: 0.{90 - k}\n" for k in range(1, 13)))
    assert series(run, LOSS) == {k: float(f"0.{90 - k}") for k in range(1, 13)}
    run = read_text("".join(f"2024-07-24 11:00:{k:02d} INFO Episode: {k}, reward: {k}.5, loss: 0.{90 - k}\n"
                            for k in range(1, 13)))
    assert series(run, LOSS)[12] == 0.78


def test_loguru_source_and_a_unix_time_head_are_no_metrics() -> None:
    """loguru's `name:function:line - ` and a Unix time heading the line were read as metrics (`train/loop` = 42,
    `yolox.core.trainer` = 253 at steps of their own)."""
    run = read_text("".join(f"\x1b[32m2024-07-24 11:00:0{k}.123\x1b[0m | \x1b[1mINFO    \x1b[0m | \x1b[36mtrain\x1b[0m:"
                            f"\x1b[36mloop\x1b[0m:\x1b[36m42\x1b[0m - \x1b[1m{{'step': {10 * k}, 'loss': {2 - k / 10:.3f}, "
                            f"'lr': 0.0001}}\x1b[0m\n" for k in range(1, 8)))
    assert series(run, LOSS)[70] == 1.3 and {p.name for p in run.points} == {LOSS, "opt/lr"}
    run = read_text("".join(f"[gpu-node1] 17218200{k:02d}.104729 INFO     | yolox.core.trainer:253 - step {10 * k}: "
                            f"loss: {2 - k / 10:.3f}\n" for k in range(1, 8)))
    assert series(run, LOSS)[70] == 1.3 and {p.name for p in run.points} == {LOSS}
