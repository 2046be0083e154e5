"""A line that prints only `Training epoch: N` / `Eval epoch: N` heads the tab-indented lines after it (st-gcn's
IO logger), and a Python dict of settings is a config dump, never a record."""

from __future__ import annotations

import math

from stethoscope.records import EVAL_LOSS, LOSS
from tests.importers.series import names, read_text, series

CONFIG = ("{'work_dir': './output', 'config': 'config/st_gcn/train.yaml', 'phase': 'train', 'start_epoch': 0, "
          "'num_epoch': 50, 'use_gpu': False, 'device': [0, 1], 'log_interval': 100, 'base_lr': 0.1, "
          "'step': [20, 30, 40], 'batch_size': 64}")


def _stgcn(epochs: int, nan_until: int = 0) -> str:
    """st-gcn's log.txt shape, written by hand: a config dict after `Parameters:`, then epoch blocks."""
    out = ["[03.24.23|09:56:11] Parameters:", CONFIG, ""]
    for e in range(epochs):
        loss = "nan" if e < nan_until else f"{2.0 - 0.1 * e}"
        out += [f"[03.24.23|10:{e:02d}:11] Training epoch: {e}"]
        if e == 1:
            out += [f"[03.24.23|10:{e:02d}:20] \tIter 100 Done. | loss: 1.9 | lr: 0.010000"]
        out += [f"[03.24.23|10:{e:02d}:31] \tmean_loss: {loss}", f"[03.24.23|10:{e:02d}:31] Time consumption:",
                f"[03.24.23|10:{e:02d}:31] Done."]
        if e % 2 == 1:
            out += [f"[03.24.23|10:{e:02d}:40] Eval epoch: {e}", f"[03.24.23|10:{e:02d}:50] \tmean_loss: {3.0 - 0.1 * e}",
                    f"[03.24.23|10:{e:02d}:50] \tTop1: {10 * e}.00%", f"[03.24.23|10:{e:02d}:50] Done."]
    return "\n".join(out) + "\n"


def test_a_training_epoch_head_numbers_its_indented_record() -> None:
    """Read before as 1 step from the config dict (`'step': [20, ..]` as the step) and the `Iter` line: the 8
    `mean_loss` records, 2 of them NaN, were lost."""
    run = read_text(_stgcn(8, nan_until=2))
    loss = series(run, LOSS)
    assert sorted(loss) == list(range(8))
    assert math.isnan(loss[0]) and math.isnan(loss[1]) and loss[5] == 1.5
    assert series(run, EVAL_LOSS) == {1: 2.9, 3: 2.7, 5: 2.5, 7: 2.3}


def test_an_eval_head_names_its_lines_in_the_eval_split() -> None:
    run = read_text(_stgcn(4))
    assert [n for n in names(run) if "top1" in n.lower()] and all(n.startswith("eval/") for n in names(run)
                                                                   if "top1" in n.lower())
    assert "eval/epoch" not in names(run)


def test_a_dict_of_settings_is_no_record() -> None:
    run = read_text(_stgcn(4))
    assert not {"num_epoch", "base_lr", "start_epoch", "device"} & names(run)
    assert 20 not in series(run, LOSS) and max(p.step for p in run.points) == 3


def test_a_dict_of_metrics_is_still_a_record() -> None:
    """HF Trainer's dicts (numbers only) stay records (a guard for the config rule)."""
    text = "".join(f"{{'loss': {2.0 - 0.1 * i:.2f}, 'learning_rate': 1e-05, 'epoch': {i / 10:.1f}}}\n" for i in range(1, 6))
    run = read_text(text)
    assert len(series(run, LOSS)) == 5


def test_an_epoch_head_ending_in_a_colon_heads_the_lines_after_it() -> None:
    """A Keras loop's summary through python logging: `Epoch 1:`, then `loss=..` and `val_loss=..` on lines of
    their own (the log was refused: 'metrics without a step counter')."""
    lines = []
    for e in range(1, 6):
        lines += [f"2025-06-14 22:57:2{e},314 - INFO - Epoch {e}: ",
                  f"2025-06-14 22:57:2{e},314 - INFO - loss={4.8 - 0.5 * e:.4f}, accuracy=0.0190, ",
                  f"2025-06-14 22:57:2{e},314 - INFO - val_loss={4.3 - 0.2 * e:.4f}, val_accuracy=0.0425"]
    run = read_text("\n".join(lines) + "\n")
    assert series(run, LOSS) == {1: 4.3, 2: 3.8, 3: 3.3, 4: 2.8, 5: 2.3}
    assert series(run, EVAL_LOSS) == {1: 4.1, 2: 3.9, 3: 3.7, 4: 3.5, 5: 3.3}
