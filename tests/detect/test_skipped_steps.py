"""Every optimizer step skipped (`detect.skipped_steps`): DeepSpeed's `step=N, skipped=M` with M growing by the
whole print interval is an fp16 loss scaler that overflows on every step; no update reaches the weights, which is
why such a run's loss never comes down. A wild DeepSpeed log said only "underfitting (not learning)", with
"LR too low" for a cause, while its `skipped=` count grew step for step."""

from __future__ import annotations

import random
from pathlib import Path

from stethoscope.detect.skipped_steps import SkippedStepsDetector
from stethoscope.diagnose.engine import diagnose_run
from stethoscope.findings.catalogue import LOSS_SCALE_COLLAPSE
from stethoscope.importers import read_any
from stethoscope.records import SKIPPED, StepRecord


def _deepspeed_log(path: Path, skipped_from: int | None, steps: int = 300, every: int = 10) -> Path:
    """A DeepSpeed ZeRO run's console: the loss scaler's OVERFLOW lines, `log_dist`'s step/skipped line, the
    timer's throughput line and the script's own loss print."""
    rnd = random.Random(1)
    lines = ["[2024-03-02 11:02:11,120] [INFO] [real_accelerator.py:161:get_accelerator] Setting ds_accelerator to cuda",
             "[2024-03-02 11:02:14,882] [INFO] [config.py:984:print]   fp16_enabled ................. True"]
    scale, skipped, loss = 65536.0, 0, 10.83
    for step in range(1, steps + 1):
        sec = 15 + step * 0.6
        stamp = f"2024-03-02 11:{2 + int(sec) // 60:02d}:{int(sec) % 60:02d},{int(sec * 1000) % 1000:03d}"
        if skipped_from is not None and step >= skipped_from:
            lines.append(f"[{stamp}] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping "
                         f"step. Attempted loss scale: {int(scale)}, reducing to {int(max(1.0, scale / 2))}")
            scale, skipped = max(1.0, scale / 2), skipped + 1
        else:
            loss = max(2.0, loss - 0.02)
        if step % every == 0:
            lines.append(f"[{stamp}] [INFO] [logging.py:96:log_dist] [Rank 0] step={step}, skipped={skipped}, "
                         "lr=[2e-05], mom=[(0.9, 0.999)]")
            lines.append(f"[{stamp}] [INFO] [timer.py:260:stop] epoch=0/micro_step={step}/global_step={step}, "
                         "RunningAvgSamplesPerSec=53.1, CurrSamplesPerSec=53.4, MemAllocated=6.1GB, MaxMemAllocated=9.8GB")
            lines.append(f"step {step} | loss {loss + rnd.gauss(0, 0.01):.4f}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _findings(path: Path) -> list:
    (run,) = read_any(path)
    return diagnose_run(run).findings


def test_a_deepspeed_run_skipping_every_step_is_named_the_cause(tmp_path: Path) -> None:
    found = [f for f in _findings(_deepspeed_log(tmp_path / "ds.log", skipped_from=1)) if f.type == LOSS_SCALE_COLLAPSE]
    (f,) = found
    assert f.severity == "warning" and f.step <= 10 and f.end_step == 300
    assert f.evidence["skipped"] == 300 and f.evidence["share_skipped"] >= 0.9
    assert "skipped" in f.message and "cannot learn" in f.message


def test_skipping_that_starts_mid_run_is_dated_there(tmp_path: Path) -> None:
    (f,) = [f for f in _findings(_deepspeed_log(tmp_path / "ds.log", skipped_from=121)) if f.type == LOSS_SCALE_COLLAPSE]
    assert 115 <= f.step <= 125


def test_routine_overflows_are_not_a_finding(tmp_path: Path) -> None:
    det, out = SkippedStepsDetector(), []
    for i, step in enumerate(range(10, 1001, 10)):  # the scale probing upward: one skip every ~200 steps
        out += det.update(StepRecord(step, {"skipped": float(step // 200)}))
    out += det.finish()
    assert out == []


def test_a_stretch_too_short_to_matter_is_not_reported() -> None:
    det, out = SkippedStepsDetector(), []
    for step in range(10, 301, 10):
        out += det.update(StepRecord(step, {SKIPPED: 10.0 if 100 < step <= 130 else 0.0}))  # 30 steps, per interval
    out += det.finish()
    assert out == []


def test_megatron_interval_counts_of_every_iteration_are_reported() -> None:
    det, out = SkippedStepsDetector(), []
    for step in range(100, 2001, 100):  # `number of skipped iterations: 100` in each 100-iteration record
        out += det.update(StepRecord(step, {SKIPPED: 100.0 if step > 500 else 0.0}))
    out += det.finish()
    assert [f.step for f in out if f.end_step == 2000] == [501]


def test_a_run_that_logs_its_loss_scale_is_left_to_the_loss_scale_detector() -> None:
    from stethoscope.records import LOSS_SCALE
    det, out = SkippedStepsDetector(), []
    for step in range(100, 2001, 100):  # Megatron: the scale is in the record, its collapse is detect.amp's
        out += det.update(StepRecord(step, {SKIPPED: 100.0, LOSS_SCALE: 1.0}))
    out += det.finish()
    assert out == []
