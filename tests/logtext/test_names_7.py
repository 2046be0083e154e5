"""The series a person sees are named as the log names them (issue 26): acronyms in camel case stay one word
(`mAP` map, `mIoU` miou), and words that cannot name a metric (a loop's label `Epoch(train)`, prose around a
number on an eval line) make no series. Each log is read short (line by line) and long (a shape at a time)."""

from __future__ import annotations

import pytest

from stethoscope.detect.overfit_quality import HeldOutQuality
from stethoscope.logtext.console_line import key_name
from stethoscope.records import EVAL_LOSS, LOSS
from tests.importers.series import names, read_text, series

LINES = [6, 1500]
_MMENGINE = "2023/06/11 11:{m:02d}:{s:02d} - mmengine - INFO - "


def _mmdet(epochs: int) -> str:
    """mmdetection 3.x (mmengine): train lines headed `Epoch(train) [E][I/T]`, an eval line `Epoch(val) [E][T/T]`."""
    lines = []
    for e in range(1, epochs + 1):
        for i in (5, 10, 15):
            head = _MMENGINE.format(m=e % 60, s=i)
            lines.append(f"{head}Epoch(train)  [{e}][{i:2d}/16]  lr: 8.6212e-05  eta: 0:09:45  time: 0.9216  "
                         f"data_time: 0.2306  memory: 1490  loss: {3 - e / 1e4:.4f}  loss_cls: 2.0060")
        lines.append(f"{_MMENGINE.format(m=e % 60, s=30)}Epoch(val) [{e}][13/13]    coco/bbox_mAP: 0.{5000 + e:04d}  "
                     f"coco/bbox_mAP_50: 0.7800  coco/segm_mAP: 0.5260  data_time: 0.0177  time: 0.7087")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("n", LINES)
def test_mmengines_ap_is_map_and_its_loop_label_no_series(n: int) -> None:
    run = read_text(_mmdet(n))
    got = names(run)
    assert {"eval/coco/bbox_map", "eval/coco/bbox_map_50", "eval/coco/segm_map"} <= got
    assert not [name for name in got if "(" in name or "m_ap" in name]  # was epoch(train), eval/epoch(val), m_ap
    assert len(series(run, LOSS)) == 3 * n  # the train records are as before
    maps = series(run, "eval/coco/bbox_map")
    assert len(maps) == n and max(maps.values()) == pytest.approx(0.5 + n / 1e4)


def _mmseg(iters: int) -> str:
    """mmsegmentation 1.x: `Iter(train) [N/T]` lines, then an eval line `Iter(val) [T/T]` of aAcc, mIoU, mAcc."""
    lines = []
    for k in range(1, iters + 1):
        step = 50 * k
        lines.append(f"{_MMENGINE.format(m=k % 60, s=1)}Iter(train) [{step:5d}/80000]  lr: 1.0e-02  eta: 9:51:46  "
                     f"time: 0.4408  data_time: 0.0091  memory: 3773  loss: {2 - k / 1e4:.4f}  decode.loss_ce: 0.9")
        if k % 2 == 0:
            lines.append(f"{_MMENGINE.format(m=k % 60, s=2)}Iter(val) [500/500]    aAcc: 93.2100  mIoU: "
                         f"{40 + k / 100:.4f}  mAcc: 80.1000  data_time: 0.0090  time: 0.2140")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("n", LINES)
def test_mmsegs_miou_is_one_word_and_a_quality_metric(n: int) -> None:
    """`mIoU` was read `eval/m_io_u`, which no rule knew for the mean IoU: its rise could not tell an eval loss's
    rise from overfitting. Read `eval/miou`, it is a quality metric beside `eval/m_acc` and `eval/a_acc`."""
    run = read_text(_mmseg(n))
    got = names(run)
    assert {"eval/miou", "eval/m_acc", "eval/a_acc"} <= got and "eval/m_io_u" not in got
    quality = HeldOutQuality()
    for p in run.points:
        quality.push(p.step, {p.name: p.value})
    assert {"eval/miou", "eval/m_acc", "eval/a_acc"} <= set(quality.series)
    assert len(series(run, "eval/miou")) == n // 2 and quality.series["eval/miou"][-1] == [50 * n, 40 + n / 100]


def test_stored_spellings_stay_quality_metrics() -> None:
    """Runs stored before keep `m_ap` names: they are still read as the eval's quality metric."""
    quality = HeldOutQuality()
    quality.push(10, {"eval/coco/bbox_m_ap": 0.5, "eval/coco/bbox_map": 0.5, "eval/bbox_m_ap_50": 0.7, "eval/map": 0.4})
    assert len(quality.series) == 4


@pytest.mark.parametrize(("key", "read"), [
    ("mAP", "map"), ("mIoU", "miou"), ("bbox_mAP_50", "bbox map 50"), ("nDCG", "ndcg"), ("IoU", "iou"),
    ("AUROC", "auroc"), ("F1", "f1"), ("valAUROC", "val auroc"), ("meanIoU", "mean iou"), ("top1Acc", "top1 acc"),
    ("mAcc", "m acc"), ("aAcc", "a acc"), ("mDice", "m dice"), ("gradNorm", "grad norm"), ("lossG", "loss g"),
    ("StepTimeMs", "step time ms"), ("LearningRate", "learning rate"), ("kNN_acc", "knn acc"),
])
def test_camel_case_parts_words_not_acronyms(key: str, read: str) -> None:
    """A lone lower-case letter before capitals heads an acronym (mAP, mIoU, nDCG); a lower-case word before a
    capital, or a capitalised word, is a word of its own."""
    assert key_name(key, "") == read


def _d2(iters: int) -> str:
    """detectron2: train lines, and an evaluation's prose on lines whose logger (`d2.evaluation`) makes them eval
    lines: `Start inference on 6 batches`, `finished in 0.00 seconds.`, `shown as NaN.`, `on 1 devices`."""
    lines = []
    for k in range(1, iters + 1):
        it = 20 * k - 1
        lines.append(f"[08/30 23:14:{k % 60:02d} d2.utils.events]:  eta: 0:10:00  iter: {it}  total_loss: "
                     f"{3 - k / 1e4:.4f}  loss_ce: 1.02  time: 0.5120  data_time: 0.0100  lr: 0.0001  max_mem: 5000M")
        if k % 5 == 0:
            lines += [
                "[08/30 23:15:00] d2.evaluation.evaluator INFO: Start inference on 6 batches",
                "[08/30 23:15:03] d2.evaluation.evaluator INFO: Total inference time: 0:00:00.390778 "
                "(0.390778 s / iter per device, on 1 devices)",
                "[08/30 23:15:03] d2.evaluation.fast_eval_api INFO: COCOeval_opt.evaluate() finished in 0.00 seconds.",
                "[08/30 23:15:03] d2.evaluation.coco_evaluation INFO: Some metrics cannot be computed and is shown "
                "as NaN.",
            ]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("n", LINES)
def test_an_evaluations_prose_makes_no_eval_series(n: int) -> None:
    run = read_text(_d2(n))
    got = names(run)
    junk = {"eval/start_inference_on", "eval/finished_in", "eval/on",
            "eval/some_metrics_cannot_be_computed_and_is_shown_as"}
    assert not got & junk, got & junk
    assert len(series(run, LOSS)) == n


@pytest.mark.parametrize("n", LINES)
def test_sentences_a_model_wrote_make_no_series(n: int) -> None:
    """A post-training log prints the model's answers between its records: the numbers in their sentences
    (`travels at 62 km/h for 2 hours`, `we know they won 24 games`) are no metrics."""
    lines = []
    for k in range(1, n + 1):
        lines.append(f"step {k} | loss {2 - k / 1e4:.4f} | lr 1.0e-05")
        if k % 3 == 0:
            lines += ["**Step 2:** The cost of one set is $3 for 5 pens.",
                      "[eval] A car travels at 62 km/h for 2 hours, then twice that speed for 3 hours. -> 310",
                      "1. **Let 'x' be the number of games:**  We know they won 24 games, and this is 60% of 'x'."]
    run = read_text("\n".join(lines) + "\n")
    assert names(run) <= {LOSS, "opt/lr"}, names(run)
    assert len(series(run, LOSS)) == n


def test_what_a_metric_name_may_be() -> None:
    from stethoscope.logtext.names import names_a_metric

    for key in ("Sen.", "Ep.", "number of nan iterations", "Best validation mean DSC", "loss", "time per step",
                "Total inference pure compute time", "coco/AP (L)", "data_wait(%)", "Avg. loss", "Test Acc"):
        assert names_a_metric(key), key
    for key in ("Epoch(train)", "Iter(val)", "Test on Epoch", "finished in", "for", "so she buys", "per pen.",
                "KaimingInit a", "hours.", "the total cost is the cost per pen multiplied by the number of sets"):
        assert not names_a_metric(key), key


def test_the_eval_loss_on_an_eval_line_is_kept() -> None:
    """Guard: an eval line's metrics keep their names (`eval/loss`), the train loss its steps."""
    lines = [f"step {k} loss {2 - k / 1e4:.4f}" + (f"\nval loss: {2.5 - k / 1e4:.4f} val mAP: 0.{k:02d}" if k % 4 == 0
                                                   else "") for k in range(1, 41)]
    run = read_text("\n".join(lines) + "\n")
    assert len(series(run, EVAL_LOSS)) == 10 and len(series(run, "eval/map")) == 10
