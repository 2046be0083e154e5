"""modded-nanogpt records from late 2024 on print no train loss on a train step, only its timing
(`step:5/1770 train_time:400ms step_avg:80.00ms`), and the loss at the evals (`step:0/1770 val_loss:10.8258 ..`).
Every step line is a step: its time is the run's throughput (the public check of real logs read 16 of 1771)."""

from __future__ import annotations

from stethoscope.importers.registry import read_any
from stethoscope.records import EVAL_LOSS, LOSS, STEP_TIME


def test_train_steps_without_a_loss_are_read_for_their_time(tmp_path):
    lines = ["step:0/40 val_loss:10.8258 train_time:0ms step_avg:0.04ms"]
    for s in range(1, 41):
        lines.append(f"step:{s}/40 train_time:{s * 90 + (300 if s >= 21 else 0)}ms step_avg:{90.0:.2f}ms")
        if s % 20 == 0:
            lines.append(f"step:{s}/40 val_loss:{10.8 - s * 0.1:.4f} train_time:{s * 90}ms step_avg:90.00ms")
    path = tmp_path / "run.txt"
    path.write_text("\n".join(lines) + "\n")
    (run,) = read_any(path)
    points = list(zip(run.columns.names, run.columns.steps, run.columns.values))
    times = {s: v for n, s, v in points if n == STEP_TIME}
    evals = {s: v for n, s, v in points if n == EVAL_LOSS}
    assert len(times) == 39 and times[2] == 0.09, times  # (step time from the cumulative train_time)
    assert times[21] == 0.39  # a slow step stays slow: the difference of the running totals
    assert sorted(evals) == [0, 20, 40]
    assert not [s for n, s, _ in points if n == LOSS]  # no train loss invented


def test_the_optimization_tracks_seconds_and_extra_eval_fields_are_read(tmp_path):
    # `train_time:144.468s` (seconds) and `val_avg_loss:` / `val_ema_loss:` between the loss and the time; the
    # code the log prints at its top (`self.it = 0` .. `val_loss = 0`: a step 0 eval of 0 to the console reader) is
    # no eval
    lines = ["val_tokens = 20 * 524288", "        self.it = 0", "    model.eval()", "        val_loss = 0",
             "        val_loss /= val_tokens",
             '        print0(f"step:{step}/{train_steps} val_loss:{val_loss:.5f} train_time:{training_time:.3f}s"']
    for s in range(125, 1001, 125):
        v = 3.3 + 1.2 * 0.998 ** s
        lines.append(f"step:{s}/1000 val_loss:{v:.5f} val_avg_loss:{v:.5f} val_ema_loss:{v:.5f} "
                     f"train_time:{s * 1.155:.3f}s step_avg:1155.00ms")
    path = tmp_path / "run.txt"
    path.write_text("\n".join(lines) + "\n")
    (run,) = read_any(path)
    points = list(zip(run.columns.names, run.columns.steps, run.columns.values))
    evals = {s: v for n, s, v in points if n == EVAL_LOSS}
    assert sorted(evals) == list(range(125, 1001, 125)) and min(evals.values()) > 3.3, evals
    times = {s: v for n, s, v in points if n == "perf/train_time_s"}
    assert abs(times[1000] - 1155.0) < 1e-6  # seconds, not thousands of seconds
