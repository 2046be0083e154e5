"""Misread and wrongly refused classes of real public logs (wild-logs-8, readers-18), each as a general rule."""

from __future__ import annotations

import pytest

from stethoscope.errors import InputError
from stethoscope.importers.base import ImportedRun
from stethoscope.records import LOSS
from tests.importers.series import read_bytes, read_text, series


def _lines(n: int = 12) -> bytes:
    return "".join(f"step {10 * k:5d} | loss {3.0 - k / 20:.4f} | lr 3.0e-04 | 500 tok/s\n"
                   for k in range(1, n + 1)).encode()


def test_a_hole_of_nuls_before_the_text_is_skipped() -> None:
    """A log truncated while its writer held it open starts with NULs: it was judged binary (refused)."""
    (run,) = read_bytes(b"\x00" * 4096 + _lines())
    assert series(run, LOSS) == {10 * k: round(3.0 - k / 20, 4) for k in range(1, 13)}


def test_zeroed_blocks_at_the_end_are_skipped() -> None:
    """The zeroed tail a crash leaves: the text before it is read."""
    (run,) = read_bytes(_lines() + b"\x00" * 512)
    assert len(series(run, LOSS)) == 12


def test_binary_data_with_scattered_nuls_is_still_refused() -> None:
    """A guard: NULs among other control bytes (a checkpoint, an image) are binary, not a padded log."""
    blob = bytes(range(256)) * 64
    with pytest.raises(InputError):
        read_bytes(b"\x00" * 64 + blob + _lines())


def _read_runs(text: str) -> list[ImportedRun]:
    return read_bytes(text.encode())


def test_a_later_spelling_of_the_loss_at_the_same_step_does_not_overwrite_it() -> None:
    """`[step N] loss=..` then `[step N] avg_loss=0.0000` (another quantity): the loss was overwritten with 0."""
    text = "".join(f"[step {k}] loss={0.14 + k / 1e4:.4f} rewards(c/r)=-0.01/-0.01\n"
                   + (f"[step {k}] avg_loss=0.0000\n" if k % 5 == 0 else "") for k in range(1, 21))
    run = read_text(text)
    assert series(run, LOSS) == {k: round(0.14 + k / 1e4, 4) for k in range(1, 21)}
    assert series(run, "avg_loss") == {k: 0.0 for k in range(5, 21, 5)}


def _yolo_launch(epochs: int, batch: int, loss0: float) -> str:
    out = [f"2024-01-02 10:00:00.000 | INFO     | pkg.core.trainer:before_train:120 - args: Namespace(batch_size={batch},"
           " devices=1, fp16=False)\n"]
    k = 0
    for e in range(1, epochs + 1):
        for i in (10, 20):
            k += 1
            out.append(f"2024-01-02 10:00:{k % 60:02d}.000 | INFO     | pkg.core.trainer:after_iter:240 - epoch: {e}/100, "
                       f"iter: {i}/20, mem: 1400Mb, iter_time: 0.2s, total_loss: {loss0 / (1 + k / 3):.2f}, lr: 1e-4\n")
    return "".join(out)


def test_an_aborted_launchs_epochs_are_a_run_of_their_own() -> None:
    """The epochs start over after a traceback and a new launch's header: the later launch's steps were offset by
    the aborted one's epochs (read as continuing: its last step too far)."""
    crash = "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\nRuntimeError: CUDA error\n"
    runs = _read_runs(_yolo_launch(5, 4, 10.0) + crash + _yolo_launch(8, 2, 10.0))
    assert len(runs) == 2
    assert max(series(runs[-1], LOSS)) == 7 * 20 + 20
    assert max(series(runs[0], LOSS)) == 4 * 20 + 20


def test_a_resume_with_one_header_is_one_run() -> None:
    """A guard: the epochs count on after a resume (no start over near zero): one run, steps as before."""
    text = _yolo_launch(3, 4, 10.0)
    more = _yolo_launch(6, 4, 5.0).split("\n")
    runs = _read_runs(text + "\n".join(line for line in more[1:] if "epoch: 4/" in line or "epoch: 5/" in line) + "\n")
    assert len(runs) == 1
    assert max(series(runs[0], LOSS)) == 4 * 20 + 20


def _gcn_launch(epochs: int, loss: str) -> str:
    out = ["[01.02.24|10:00:00] Parameters:\n",
           "{'work_dir': './out', 'phase': 'train', 'device': [0], 'base_lr': 0.1, 'step': [10, 50]}\n", "\n"]
    for e in range(epochs):
        out += [f"[01.02.24|10:00:{e:02d}] Training epoch: {e}\n", f"[01.02.24|10:00:{e:02d}] \tmean_loss: {loss}\n",
                f"[01.02.24|10:00:{e:02d}] Time consumption:\n", f"[01.02.24|10:00:{e:02d}] Done.\n"]
    return "".join(out)


def test_launches_that_each_start_the_epochs_over_are_runs_of_their_own() -> None:
    """Each launch prints its settings and starts at `Training epoch: 0`; the NaN loss tells no restart by its
    value, the launch's header does: they were one series."""
    runs = _read_runs(_gcn_launch(6, "nan") + _gcn_launch(4, "nan") + _gcn_launch(5, "nan"))
    assert [max(series(r, LOSS)) for r in runs] == [5, 3, 4]


def test_a_tables_episode_column_is_its_step() -> None:
    """A CSV with no step column and a rising `Episode` count: it was stepped by the row index (0, 1, ..)."""
    rows = "".join(f"{250 * k},{100 + k},{-30 + k / 2:.3f},{-12 + k / 3:.3f}\n" for k in range(1, 11))
    (run,) = read_bytes(("Episode,Avg length,Total reward A,Total reward B\n" + rows).encode(), "rewards.csv")
    assert sorted({p.step for p in run.points}) == [250 * k for k in range(1, 11)]
    assert "Episode" not in {p.name for p in run.points}


def test_an_episode_column_that_does_not_rise_is_no_step() -> None:
    """A guard: an `Episode` column repeating (several rows an episode) stays a column; the row numbers the step."""
    rows = "".join(f"{k // 3},{0.5 + k / 100:.2f}\n" for k in range(12))
    (run,) = read_bytes(("Episode,loss\n" + rows).encode(), "log.csv")
    assert len(series(run, LOSS)) == 12


def test_a_log_whose_losses_all_have_names_of_their_own_is_read() -> None:
    """PPO's `iter=0000 .. loss_critic=nan loss_objective=nan` after a loguru prefix: no key named the train loss,
    so nothing in the head counted as a metric line and the log was refused; its NaN went unseen."""
    head = "2025-01-02 10:00:{:02d}.000 | INFO     | __main__:_log_metrics:146 - "
    text = "".join(head.format(k) + f"iter={k:04d} reward=0.17 entropy=3.89 kl_approx=0.75 loss_critic="
                   f"{'nan' if k < 2 else 0.01 * k} loss_objective={'nan' if k < 2 else -0.03}\n" for k in range(6))
    run = read_text(text)
    critic = series(run, "loss_critic")
    assert sorted(critic) == list(range(6))
    assert critic[0] != critic[0] and critic[5] == 0.05  # the NaN is read
