"""Console logs whose records the general reader could not number (wild-logs-6's M3 and R1, readers-15): read
again by `importers/line_records.py` when the general read found few steps. Synthetic excerpts in the shapes of
the real files.

- A TF2 tutorial prints `Epoch 1 Loss 4.2402 Accuracy 0.0000` every batch (a running mean, no batch index) and
  `Epoch 1 Batch 500 Loss ..` every 500: before, only the indexed lines were read (9 points of 3001 records).
- A CIFAR script prints `\\tepoch 3: train acc: 71.0%, loss: 0.82` (tab-indented): before, all 50 at step 1 (the
  tab read as a continuation of the record before), one point in the store.
- A Decision Transformer prints `num of updates: 1000` then `ret loss: 3.3`, `action loss: 0.26` .. between `=====`
  rules; PointNet `-----0------` then `train_mean loss: 2.52`, `test_mean loss: 3.64`: before, refused
  ('read 0 training steps .. metrics without a step counter').
"""

from __future__ import annotations

import pytest

from stethoscope.importers import read_any
from stethoscope.records import EVAL_LOSS, LOSS
from tests.conftest import run_cli
from tests.importers.series import series


def _tf2(epochs: int, batches: int) -> str:
    out = ["2019-06-09 13:40:33.154933: I tensorflow/core/platform/cpu_feature_guard.cc:142] Your CPU supports AVX2\n",
           "train example size: 51785\n"]
    for e in range(1, epochs + 1):
        for b in range(batches):
            loss = 4.2 / (1 + (e - 1) * batches + b) ** 0.5
            if b % 50 == 0:
                out.append(f"Epoch {e} Batch {b} Loss {loss:.4f} Accuracy {0.4 * e / epochs:.4f}\n")
            out.append(f"Epoch {e} Loss {loss:.4f} Accuracy {0.4 * e / epochs:.4f}\n")
            out.append(f"Time taken for 1 epoch: {29.0 + b * 0.4:.6f} secs\n\n")
            if b % 20 == 0:
                out.append("tgt_inp.shape: (64, 37)\n(64, 8, 37, 37)\n")
    return "".join(out)


def test_per_batch_lines_with_an_epoch_and_no_index_are_records(write) -> None:
    (run,) = read_any(write("log_train.txt", _tf2(3, 120)))
    loss = series(run, LOSS)
    assert len(loss) == 360 and sorted(loss)[:2] == [1, 2]  # each line a record, numbered in file order
    assert loss[360] == pytest.approx(4.2 / 360 ** 0.5, abs=1e-4)
    assert "no step counter" in run.meta["notes"]["step"]


def test_tab_indented_epoch_lines_are_each_a_record(write) -> None:
    text = "".join(f"\tepoch {e}: train acc: {40 + e:.3f}%, loss: {1.5 / e:.12f}\n" for e in range(1, 21))
    text += "The result of ResNet18 with Adam is test acc: 76.82%, loss: 0.6848\n"
    (run,) = read_any(write("log_train.txt", text))
    assert sorted(series(run, LOSS)) == list(range(1, 21))  # the step is the epoch
    assert series(run, LOSS)[20] == pytest.approx(0.075)


def test_counterless_lines_without_an_epoch_stay_refused(write, cli_env) -> None:
    """Nothing says such lines are a training's steps (an eval sweep's running figures): refused as before."""
    path = write("nohup.out", "starting\n" + "".join(f"loss: {2 - i / 10:.2f} | acc: 0.{i}\n" for i in range(40)))
    out = run_cli("diagnose", str(path), env=cli_env)
    assert out.returncode == 2 and "without a step counter" in out.stderr


def _decision_transformer(blocks: int) -> str:
    out = ["max_train_iters:  500\nnum_updates_per_iter:  100\ntotal updates:  50000\n", "=" * 60 + "\n",
           "start time: 24-04-25-06-52-11\n", "=" * 60 + "\n", "device set to: cuda\nnum of trajs: 2041\n"]
    for k in range(1, blocks + 1):
        out.append("=" * 60 + f"\ntime elapsed: 0:0{k % 10}:07\nnum of updates: {1000 * k}\n")
        out.append(f"ret loss: {3.3 / k ** 0.3:.5f}\naction loss: {0.26 / k ** 0.3:.5f}\n"
                   f"state loss: {0.14 / k ** 0.3:.5f}\nexp loss: {0.0125 / k:.5f}\n")
    return "".join(out) + "=" * 60 + "\n"


def test_blocks_headed_by_a_counter_line_are_records(write) -> None:
    (run,) = read_any(write("output.log", _decision_transformer(12)))
    ret = series(run, "ret_loss")
    assert sorted(ret) == [1000 * k for k in range(1, 13)]
    assert ret[1000] == pytest.approx(3.3) and "perf/elapsed_s" not in {p.name for p in run.points}
    assert "heads each" in run.meta["notes"]["step"]


def test_blocks_headed_by_a_rule_carrying_the_epoch_are_records(write) -> None:
    text = "".join(f"-----{e}------\ntrain_mean loss: {2.5 / (e + 1):.6f}\ntrain_accuracy: {0.3 + e / 50:.6f}\n"
                   f"test_mean loss: {3.6 + e / 10:.6f}\ntest_accuracy: 0.04\n" for e in range(15))
    (run,) = read_any(write("log_train.txt", "**** EPOCH 000 ****\n" + text))
    assert sorted(series(run, LOSS)) == list(range(15))
    assert series(run, EVAL_LOSS)[14] == pytest.approx(5.0)


def _two_scopes(epochs: int, session: bool) -> str:
    """A logging script's `Epoch e, Batch 0/8, Loss:` (the epoch's first batch only) beside `Epoch e Training -
    Loss:` (the epoch's mean) and `Epoch e Validation - Loss:`; then, with `session`, a launch of one epoch more."""
    out = ["2025-07-05 12:57:01,000 - __main__ - INFO - Starting training for 15 epochs...\n"]
    for e in range(1, epochs + 1):
        at = f"2025-07-05 12:57:{10 + e:02d},293 - __main__ - INFO - "
        out += [f"{at}Epoch {e}, Batch 0/8, Loss: {2.55 / e ** 2:.4f}\n",
                f"{at}Epoch {e} Training - Loss: {1.2 / e ** 2:.4f}, Mod Acc: {0.8 + e / 100:.4f}, Time: 0.5s\n",
                f"{at}Epoch {e} Validation - Loss: {18.5 + 3 * e:.4f}, Mod Acc: 0.0000, Jam Acc: 0.2920\n"]
    if session:
        at = "2025-07-05 12:59:33,799 - __main__ - INFO - "
        out += [f"{at}Starting training for 1 epochs...\n", f"{at}Epoch 1, Batch 0/8, Loss: 2.5475\n",
                f"{at}Epoch 1 Training - Loss: 1.0774, Mod Acc: 0.8520, Time: 1.8s\n",
                f"{at}Epoch 1 Validation - Loss: 21.9041, Mod Acc: 0.0000, Jam Acc: 0.2920\n"]
    return "".join(out)


def test_the_epochs_own_loss_line_is_the_train_loss_beside_a_first_batch_sample(write) -> None:
    """Before: only the `Batch 0/8` lines were read (the epoch's lines dropped as counterless), and the appended
    session's first batch (2.55) was laid over the last epoch's step: an ERROR divergence at the end."""
    runs = read_any(write("training.log", _two_scopes(12, session=True)))
    assert len(runs) == 2 and len(series(runs[1], LOSS)) == 1  # the one-epoch launch after: a run of its own
    loss = series(runs[0], LOSS)
    assert sorted(loss) == list(range(1, 13)) and loss[1] == pytest.approx(1.2)  # the epoch's mean, not 2.55
    assert series(runs[0], EVAL_LOSS)[12] == pytest.approx(18.5 + 36)


def test_batch_lines_of_many_counts_stay_the_train_loss(write) -> None:
    """Counter lines at many batches of each epoch are the train loss series; an epoch's average beside them is
    not (MONAI's `12/154, train_loss:` and `epoch 1 average loss:`)."""
    text = "".join(f"Epoch {e}, Batch {b}/8, Loss: {2.0 / (e * 8 + b):.4f}\n" for e in range(1, 13) for b in (0, 4)) + \
        "".join(f"Epoch {e} Training - Loss: 9.{e:02d}\n" for e in range(1, 2))
    (run,) = read_any(write("training.log", text))
    assert len(series(run, LOSS)) == 24


def test_a_message_about_a_step_heads_no_block(write, cli_env) -> None:
    """`Iter 150: Saved adapter weights to ..` names a step in a sentence: no record's head. The counterless
    metric lines between such messages stay refused (a block read took them for 20 records of mixed names)."""
    text = "".join(f"Iter {150 * k}: Saved adapter weights to adapters/{150 * k:07d}_adapters.safetensors.\n"
                   f"Using cuda device\nLOSS: {4 - k / 10:.4f} | It/sec: 2.{k} | rank: 0\n"
                   for k in range(1, 21))
    path = write("train.log", text)
    assert not read_any(path)[0].columns.size
    out = run_cli("diagnose", str(path), env=cli_env)
    assert out.returncode == 2 and "read 0 training steps" in out.stderr
