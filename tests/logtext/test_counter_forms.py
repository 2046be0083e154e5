"""Step counters in forms seen in the wild: an eval loop's own counter (`val step:0`) is the eval's batch, never a
training step (fed to the counter within epochs it reset it: PaddleVideo's 25 epochs collapsed onto steps 0 and
100); a step rounded to thousands (LeRobot's `step:4K`) is read in steps."""

from __future__ import annotations

from stethoscope.records import EVAL_LOSS, LOSS
from tests.importers.series import read_text, series


def _paddlevideo(epochs: int) -> str:
    """PaddleVideo's console shape, written by hand: `train step:N` restarts every epoch, a val loop after it."""
    out = []
    for e in range(1, epochs + 1):
        for s in (0, 100):
            out.append(f"[12/25 14:{e:02d}:{s // 10:02d}] epoch:[{e:>3}/{epochs} ] train step:{s:<4} loss: "
                       f"{3.0 - 0.1 * e - s / 1000:.5f} lr: 0.010000 top1: 0.2 batch_cost: 1.9 sec, ips: 32.9 instance/sec.")
        out.append(f"[12/25 14:{e:02d}:30] END epoch:{e}   train loss_avg: {3.0 - 0.1 * e:.5f}  top1_avg: 0.1")
        out.append(f"[12/25 14:{e:02d}:31] epoch:[{e:>3}/{epochs} ] val step:0    loss: {3.5 - 0.1 * e:.5f} top1: 0.125 "
                   "batch_cost: 4.2 sec, ips: 15.1 instance/sec.")
        out.append(f"[12/25 14:{e:02d}:40] END epoch:{e}   val loss_avg: {3.6 - 0.1 * e:.5f} top1_avg: 0.14")
    return "\n".join(out) + "\n"


def test_a_val_loop_counter_does_not_reset_the_training_counter() -> None:
    run = read_text(_paddlevideo(6))
    loss = series(run, LOSS)
    assert len(loss) == 12 and sorted(loss) == sorted(set(loss))  # 2 records an epoch, none overwritten
    steps = sorted(loss)
    assert loss[steps[0]] == 2.9 and loss[steps[-1]] == 2.3  # in order: epoch 1 first, epoch 6 last
    evals = series(run, EVAL_LOSS)
    assert len(evals) == 6 and max(evals) == steps[-1]  # an eval an epoch, at that epoch's last train step


def _lerobot(records: int, every: int = 200) -> str:
    """LeRobot's console shape, written by hand: the step rounded to thousands (`step:4K`) from 1,000 on, the
    logger's `file.py:line` before it, a checkpoint line every 1,000 steps."""
    out = []
    for k in range(1, records + 1):
        step = k * every
        shown = f"{step}" if step < 1000 else f"{round(step / 1000)}K"
        out.append(f"INFO 2026-06-12 10:53:24 ot_train.py:357 step:{shown} smpl:{step * 32 // 1000}K ep:{k} "
                   f"epch:{k / 4:.2f} loss:{3.0 / k:.3f} grdn:49.836 lr:1.0e-05 updt_s:0.504 data_s:0.083")
        if step % 1000 == 0:
            out.append(f"INFO 2026-06-12 10:53:25 ot_train.py:367 Checkpoint policy after step {step}")
    return "\n".join(out) + "\n"


def test_a_step_rounded_to_thousands_is_read_in_steps() -> None:
    """`step:4K` was read as step 4: 20 records became 8 at 1..800 ('the run was resumed')."""
    run = read_text(_lerobot(20))
    loss = series(run, LOSS)
    assert sorted(loss) == list(range(200, 4001, 200))
    assert loss[1400] == 0.429 and loss[4000] == 0.15
    assert not any(n.endswith(".py") or n.startswith("ot_train") for n in {p.name for p in run.points})
    assert "resumes" not in run.meta
