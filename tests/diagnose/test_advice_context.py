"""Advice that fits the evidence (issue 9): every finding type x run context (precision, device, phase of
the schedule, resumed or not) gets causes and fixes that pair up, that the context does not rule out,
and that no other finding of the same report contradicts."""

from __future__ import annotations

import itertools
import json
import re

import numpy as np
import pytest

from stethoscope.diagnose.engine import _context, diagnose_run
from stethoscope.findings.advice import (
    _STANCES,
    ADVICE,
    CHANGE_SCHEDULE,
    CONDITIONAL,
    KEEP_SCHEDULE,
    advise,
    reconcile,
)
from stethoscope.diagnose.table import Table
from stethoscope.importers.base import Columns, ImportedRun
from stethoscope.records import Finding, Point
from tests.conftest import realruns_dir

GPU_WORDS = re.compile(r"GPU|NCCL|CUDA|nvidia|\bECC\b|Xid|A100|H100", re.I)
FP16_WORDS = re.compile(r"\bfp16\b|loss scal|\bbf16\b", re.I)  # a bf16 run is not told to switch to bf16 either
WARMUP_WORDS = re.compile(r"lengthen warm-up|too short warm-up|warm-up too short|no or too short|add or lengthen", re.I)
RESTART = "resume or schedule restart at step 500 (new data or a fresh schedule)"
PAIRS = {(r.cause, r.fix) for a in ADVICE.values() for r in a.remedies} | {
    (c.remedy.cause, c.remedy.fix) for c in CONDITIONAL if c.remedy.cause}
ANSWERS = {c.remedy.fix for c in CONDITIONAL if not c.remedy.cause}

CONTEXTS = list(itertools.product(("fp16", "bf16", None), ("cpu", "gpu", None), ("in_warmup", "after_warmup", None),
                                  (True, False)))


def context(precision, device, phase):
    steps = np.arange(0, 2000, 10)
    lr = np.minimum(1.0, (steps + 10) / 1000.0) * 3e-4  # warm-up ends at step 990
    ctx = {"precision": precision, "device": device, "lr": (steps, lr) if phase else None,
           "warmup_end": {"in_warmup": 990, "after_warmup": 100, None: None}[phase]}
    return ctx


@pytest.mark.parametrize("kind", sorted(ADVICE))
def test_advice_fits_every_context(kind):
    for precision, device, phase, resumed in CONTEXTS:
        causes = [RESTART] if resumed and kind in ("loss_spike", "grad_spike", "grad_explosion") else []
        f = advise(Finding(kind, "warning", 500, "x", causes=list(causes)), context(precision, device, phase))
        where = (kind, precision, device, phase, resumed)
        assert f.causes and len(f.causes) == len(f.fixes), where
        assert len(set(f.causes)) == len(f.causes), where
        for cause, fix in zip(f.causes, f.fixes):  # fix i answers cause i
            assert (cause, fix) in PAIRS or (cause == RESTART and fix in ANSWERS), (where, cause, fix)
        text = " ".join(f.causes + f.fixes)
        if device == "cpu" and not kind.startswith("gpu_"):  # NVML findings exist only where a GPU is
            assert not GPU_WORDS.search(text), (where, GPU_WORDS.search(text))
        if precision == "bf16" and kind != "loss_scale_collapse":  # that finding itself shows an fp16 loss scale
            assert not FP16_WORDS.search(text), (where, FP16_WORDS.search(text))
        if phase == "after_warmup":
            assert not WARMUP_WORDS.search(text), (where, WARMUP_WORDS.search(text))
        if causes:  # a jump at a deliberate restart: expected, not an instability to fix
            assert f.causes == [RESTART] and f.fixes[0].startswith("nothing"), where


def test_data_causes_are_answered_in_their_own_place():
    f = advise(Finding("loss_spike", "warning", 300, "x", causes=[
        "grad norm rose 4 steps before the loss (0.24 -> 0.95)", "no lead-up: single bad batch at step 300"]))
    assert f.fixes[0].startswith("the grad norm led the loss") and "batch ids" in f.fixes[1]
    assert advise(Finding("loss_spike", "warning", 300, "x", causes=list(f.causes))).fixes == f.fixes  # idempotent


def test_a_tiny_lr_rules_out_lr_causes():
    ctx = {"lr": ([1, 2], [1.2e-9, 2.4e-9]), "warmup_end": 2}
    f = advise(Finding("divergence", "error", 2, "x", causes=["LR still in warm-up and rising (LR 2.4e-09 at step 2)"]),
               ctx)
    assert not any("LR too high" in c or "warm-up" in c for c in f.causes), f.causes


def test_a_resumed_run_is_not_told_to_keep_and_to_change_its_schedule():
    restart = advise(Finding("lr_schedule", "info", 201, "LR schedule restarted at step 201: a resume"))
    slow = advise(Finding("underfitting", "info", None, "the loss was still falling at the end"))
    spike = advise(Finding("loss_spike", "info", 201, "x", causes=[RESTART]))
    stances = lambda fs: {_STANCES.get(x) for f in fs for x in f.fixes} - {None}  # noqa: E731
    assert stances([restart, slow, spike]) == {KEEP_SCHEDULE, CHANGE_SCHEDULE}  # the contradiction reconcile removes
    reconcile([restart, slow, spike])
    assert stances([restart, slow, spike]) == {KEEP_SCHEDULE}
    assert len(slow.causes) == len(slow.fixes) and not any("schedule" in x for x in slow.fixes)
    # a more severe instability caused by an LR change wins over a note that the schedule is fine
    restart = advise(Finding("lr_schedule", "info", 201, "x"))
    div = advise(Finding("divergence", "error", 210, "x", causes=["LR jumped x50 at step 200 just before"]))
    reconcile([restart, div])
    assert stances([restart, div]) == {CHANGE_SCHEDULE} and not restart.causes


def test_the_context_is_read_from_the_run():
    pts = [Point("train/loss", s, 3.0) for s in range(50)] + [Point("opt/lr", s, min(1.0, s / 20)) for s in range(50)]
    table = Table.from_columns(Columns.of(pts))
    ctx = _context(table, {"cuda_available": False, "config": {"trainer": {"precision": "bf16-mixed"}}})
    assert ctx["device"] == "cpu" and ctx["precision"] == "bf16" and ctx["warmup_end"] == 20
    assert _context(table, {"config": {"bf16": True}})["precision"] == "bf16"
    assert _context(table, {"hparams": {"precision": 16}})["precision"] == "fp16"
    assert _context(table, {})["device"] is None and _context(table, {})["precision"] is None


def _neox_like() -> ImportedRun:
    pts = [Point("train/loss", 1, 2.2758), Point("train/loss", 2, 11.054), Point("opt/lr", 1, 1.212e-9),
           Point("opt/lr", 2, 2.424e-9)]
    return ImportedRun("train.log", "megatron", pts)


def test_a_jump_after_the_first_update_of_a_trained_model_blames_weight_loading_first():
    runs = realruns_dir()
    case = runs / "gptneox_llama_bf16_loss_jump_after_first_update" / "train.log" if runs else None
    if case is not None and case.is_file():
        from stethoscope.importers.registry import read_any

        run = read_any(case)[0]
    else:
        run = _neox_like()
    jump = [f for f in diagnose_run(run).findings if f.type in ("divergence", "loss_spike")][0]
    assert jump.causes[0].startswith("the first optimizer update wrecked already-trained weights"), jump.causes
    assert "checkpoint" in jump.causes[0] and "dtype" in jump.causes[0] and "tied" in jump.causes[0]
    text = json.dumps(jump.causes)
    assert "warm-up" not in text and "LR too high" not in text and "fp16" not in text, text
