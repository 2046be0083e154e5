"""Counters kept per epoch in JSON lines (OpenMMLab's loggers): the step is global, an eval sits at its epoch's end."""

from __future__ import annotations

from stethoscope.importers.tabular import JSONLImporter
from stethoscope.records import LOSS
from tests.importers.series import series

# mmcv 1.x `.log.json` (hand-written in its shape): `iter` starts over each epoch (30 iterations an epoch, logged
# every 10, so the last position a train row shows is 30); the val row's `iter` is the train loop's length
MMCV_LOG_JSON = """{"env_info": "sys.platform: linux", "seed": 1, "config": "model = dict()"}
{"mode": "train", "epoch": 1, "iter": 10, "lr": 0.01, "memory": 900, "data_time": 0.05, "loss": 2.0, "time": 0.08}
{"mode": "train", "epoch": 1, "iter": 20, "lr": 0.01, "memory": 900, "data_time": 0.02, "loss": 1.8, "time": 0.04}
{"mode": "train", "epoch": 1, "iter": 30, "lr": 0.01, "memory": 900, "data_time": 0.02, "loss": 1.6, "time": 0.04}
{"mode": "val", "epoch": 1, "iter": 32, "lr": 0.01, "accuracy_top-1": 40.5, "accuracy_top-5": 80.1}
{"mode": "train", "epoch": 2, "iter": 10, "lr": 0.01, "memory": 900, "data_time": 0.02, "loss": 1.5, "time": 0.04}
{"mode": "train", "epoch": 2, "iter": 20, "lr": 0.01, "memory": 900, "data_time": 0.02, "loss": 1.4, "time": 0.04}
{"mode": "train", "epoch": 2, "iter": 30, "lr": 0.01, "memory": 900, "data_time": 0.02, "loss": 1.3, "time": 0.04}
{"mode": "val", "epoch": 2, "iter": 32, "lr": 0.01, "accuracy_top-1": 50.25, "accuracy_top-5": 85.0}
{"mode": "train", "epoch": 3, "iter": 10, "lr": 0.001, "memory": 900, "data_time": 0.02, "loss": 1.2, "time": 0.04}
"""


def test_mmcv_iter_restarting_each_epoch_is_a_position_within_it(write) -> None:
    """Read as the step, `iter` put 3 epochs onto steps 10..30 (the later epochs overwrote the earlier ones) and
    the val rows onto step 32 as a train step; the step is (epoch - 1) x 32 + iter, the val row its epoch's end."""
    run = JSONLImporter().read(write("20230207_121050.log.json", MMCV_LOG_JSON))
    assert series(run, LOSS) == {10: 2.0, 20: 1.8, 30: 1.6, 42: 1.5, 52: 1.4, 62: 1.3, 74: 1.2}
    assert series(run, "eval/accuracy_top-1") == {32: 40.5, 64: 50.25}
    assert "accuracy_top-1" not in {p.name for p in run.points}
    assert "starts over every epoch" in run.meta["notes"]["step"]


def test_without_an_epoch_length_the_period_is_the_largest_position(write) -> None:
    text = "\n".join(line for line in MMCV_LOG_JSON.splitlines() if '"val"' not in line) + "\n"
    run = JSONLImporter().read(write("x.log.json", text))
    assert series(run, LOSS) == {10: 2.0, 20: 1.8, 30: 1.6, 40: 1.5, 50: 1.4, 60: 1.3, 70: 1.2}


def test_a_global_counter_beside_an_epoch_is_left_as_it_is(write) -> None:
    text = ('{"epoch": 1, "iter": 10, "loss": 2.0}\n{"epoch": 1, "iter": 20, "loss": 1.8}\n'
            '{"epoch": 2, "iter": 30, "loss": 1.6}\n{"epoch": 2, "iter": 40, "loss": 1.5}\n')
    run = JSONLImporter().read(write("log.jsonl", text))
    assert series(run, LOSS) == {10: 2.0, 20: 1.8, 30: 1.6, 40: 1.5}
    assert "notes" not in run.meta


# mmengine `vis_data/scalars.json` of an epoch-based loop: train rows carry `epoch` and the global iteration as
# `step`; the eval rows carry the epoch as `step` (23 iterations an epoch, logged every 5)
MMENGINE_EPOCH_SCALARS = """{"lr": 2e-05, "data_time": 4.0, "loss": 2.65, "loss_cls": 1.93, "time": 4.6, "epoch": 1, "memory": 1392, "step": 5}
{"lr": 4e-05, "data_time": 3.5, "loss": 2.68, "loss_cls": 1.97, "time": 4.0, "epoch": 1, "memory": 1392, "step": 20}
{"coco/bbox_mAP": 0.1, "coco/bbox_mAP_50": 0.2, "data_time": 0.1, "time": 0.18, "step": 1}
{"lr": 6e-05, "data_time": 3.2, "loss": 2.1, "loss_cls": 1.5, "time": 3.6, "epoch": 2, "memory": 1392, "step": 28}
{"lr": 8e-05, "data_time": 3.2, "loss": 1.9, "loss_cls": 1.4, "time": 3.6, "epoch": 2, "memory": 1392, "step": 43}
{"coco/bbox_mAP": 0.3, "coco/bbox_mAP_50": 0.4, "data_time": 0.1, "time": 0.19, "step": 2}
"""


def test_mmengine_eval_row_stamped_with_its_epoch_is_at_that_epochs_last_step(write) -> None:
    """The eval rows' `step` is the epoch: read as a step, mAP sat at steps 1 and 2, before any training."""
    run = JSONLImporter().read(write("scalars.json", MMENGINE_EPOCH_SCALARS))
    assert series(run, "coco/bbox_mAP") == {20: 0.1, 43: 0.3}
    assert series(run, LOSS) == {5: 2.65, 20: 2.68, 28: 2.1, 43: 1.9}
    assert series(run, "eval/time") == {20: 0.18, 43: 0.19}  # the eval's own timing, not the step's
    assert series(run, "time") == {5: 4.6, 20: 4.0, 28: 3.6, 43: 3.6}


def test_mmengine_eval_row_stamped_with_an_iteration_stays(write) -> None:
    text = MMENGINE_EPOCH_SCALARS.replace('"step": 1}', '"step": 20}').replace('"step": 2}', '"step": 43}')
    run = JSONLImporter().read(write("scalars.json", text))
    assert series(run, "coco/bbox_mAP") == {20: 0.1, 43: 0.3}
    assert "notes" not in run.meta
