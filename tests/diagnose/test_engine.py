from __future__ import annotations

import json
import math
import random

import pytest

from stethoscope.diagnose.engine import Diagnosis, diagnose_records, diagnose_run
from stethoscope.importers.base import Columns, ImportedRun, LogLine
from stethoscope.records import (
    EVAL_LOSS, GRAD_NORM, LOSS, LR, SEVERITIES, STEP_TIME, Point, StepRecord, severity_rank,
)


def _run(n=2000, seed=0, every=1, fault=None, eval_every=None, path="run.json"):
    rng = random.Random(seed)
    pts = []
    for s in range(0, n, every):
        loss = (2.5 + 6 * math.exp(-s / 300)) * (1 + rng.gauss(0, 0.02))
        g = 1.0 + 0.1 * abs(rng.gauss(0, 1))
        if fault == "nan" and s >= 1500:
            loss = float("nan")
        if fault == "spike" and s == 1200:
            loss *= 2.5
            g *= 1.2
        pts += [Point(LOSS, s, loss), Point(GRAD_NORM, s, g), Point(LR, s, 3e-4 * min(1.0, (s + 1) / 100))]
        if eval_every and s % eval_every == eval_every - 1:
            pts.append(Point(EVAL_LOSS, s, loss + 0.1))
    return ImportedRun(path, "synthetic", pts)


def test_to_dict_has_exactly_the_documented_keys():
    d = diagnose_run(_run(fault="spike"))
    out = d.to_dict()
    assert set(out) == {"path", "format", "steps", "last_step", "label", "findings", "classification"}
    assert out["steps"] == 2000 and out["format"] == "synthetic"
    for f in out["findings"]:
        assert set(f) == {"type", "severity", "step", "end_step", "message", "evidence", "causes", "fixes", "symptoms"}
        assert f["severity"] in SEVERITIES
    json.dumps(out, allow_nan=False)
    assert out["classification"]["label"]


def test_findings_ranked_by_severity_then_step_with_causes_and_fixes():
    d = diagnose_run(_run(fault="spike"))
    ranks = [(-severity_rank(f.severity), f.step if f.step is not None else math.inf) for f in d.findings]
    assert ranks == sorted(ranks)
    (spike,) = [f for f in d.findings if f.type == "loss_spike"]
    assert abs(spike.step - 1200) <= 1 and spike.fixes and spike.causes
    assert "single bad batch at step 1200" in spike.causes[0]


def test_nan_at_the_exact_step_once():
    d = diagnose_run(_run(fault="nan"))
    nans = [f for f in d.findings if f.type == "nan"]
    assert len(nans) == 1 and nans[0].step == 1500 and nans[0].severity == "critical"
    assert d.findings[0].type == "nan"


def test_healthy_run_has_nothing_serious():
    d = diagnose_run(_run(n=3000, eval_every=250))
    assert not [f for f in d.findings if severity_rank(f.severity) >= 1], [f.message for f in d.findings]
    assert d.classification["label"] in ("converged", "healthy")


def test_hang_from_silence_and_crash_from_text():
    run = _run(n=300)
    t0 = 1_650_000_000.0
    run.lines = [LogLine(1000 + i, f"[{i}] PULSE: job is running", step=299, time=t0 + 3600 * i) for i in range(3)]
    (hang,) = [f for f in diagnose_run(run).findings if f.type == "hang"]
    assert hang.step == 299 and hang.severity == "critical"
    run = _run(n=300)
    run.lines = [LogLine(900, "Traceback (most recent call last):", step=299),
                 LogLine(901, "RuntimeError: CUDA error: uncorrectable ECC error encountered", step=299)]
    crash = [f for f in diagnose_run(run).findings if f.type in ("crash", "hang")]
    assert crash and crash[0].step == 299


def test_grad_accumulation_logging_bug_is_not_underfitting():
    pts = []
    for i, s in enumerate(range(100, 700, 100)):
        ev = 0.3 + 2.0 * math.exp(-i)
        pts += [Point(LOSS, s, 16.5 * ev), Point(EVAL_LOSS, s, ev)]
    d = diagnose_run(ImportedRun("t.json", "hf_trainer_state", pts))
    assert not [f for f in d.findings if f.type in ("underfitting", "plateau") or severity_rank(f.severity) >= 1]
    assert any("35204" in f.message for f in d.findings)


def test_resumed_log_with_repeated_steps_is_kept_apart():
    pts = [Point(LOSS, s, 3.0 - 0.001 * s) for s in range(0, 500)]
    pts += [Point(LOSS, s, 3.0 - 0.001 * s) for s in range(300, 800)]  # resumed from step 300
    d = diagnose_run(ImportedRun("r.log", "x", pts))
    assert d.steps == 800
    assert not [f for f in d.findings if severity_rank(f.severity) >= 1]


def test_diagnose_records_for_a_live_store():
    recs = [StepRecord(s, {LOSS: float("nan") if s == 50 else 2.0, STEP_TIME: 0.02}) for s in range(100)]
    found = diagnose_records(recs, {})
    assert found[0].type == "nan" and found[0].step == 50 and found[0].fixes


def test_empty_run():
    d = diagnose_run(ImportedRun("e", "x", []))
    assert isinstance(d, Diagnosis) and d.findings == [] and d.steps == 0


@pytest.mark.slow
def test_a_million_steps_are_diagnosed_at_the_exact_steps():  # timing: bench/diagnose_speed.py
    rng = random.Random(0)
    pts = []
    for s in range(1_000_000):
        v = 2.5 + 8 * math.exp(-s / 20000) + rng.gauss(0, 0.03)
        if s == 700_000:
            v *= 2.5
        if s == 900_123:
            v = float("nan")
        pts += [Point(LOSS, s, v), Point(LR, s, 3e-4 * min(1, s / 2000)), Point(GRAD_NORM, s, 1 + rng.gauss(0, 0.1))]
    d = diagnose_run(ImportedRun("big", "x", pts))
    assert [f.step for f in d.findings if f.type == "nan"] == [900_123]
    assert [f.step for f in d.findings if f.type == "loss_spike"] == [700_000]


def test_series_logged_in_blocks_and_names_with_distinct_identities():
    loss = [Point(LOSS, s, 3.0 - 0.0001 * s) for s in range(6000)]
    lr = [Point("".join(["opt/", "lr"]), s, 1e-4) for s in range(6000)]  # equal names, new string objects
    d = diagnose_run(ImportedRun("tb", "tensorboard", loss + lr))
    assert d.steps == 6000
    from stethoscope.diagnose.table import Table as _Table

    table = _Table.from_columns(Columns.of(loss + lr))
    assert table.names == [LOSS, LR] and table.values.shape == (6000, 2)


def test_a_big_noisy_log_is_replayed_without_a_sample_picked_for_being_high():
    """Above DENSE_LIMIT steps the detectors see a sample plus patches around what a screen finds high.
    On a +-20% per-step log the old screen (a fixed +10%) found a quarter of the rows high, patched the
    first 400 and replayed the rest alone: a run of values picked for being high read as a sustained
    rise (a 1M-step healthy log: 1 false warning and 256k replayed rows; at 60k steps, several). The
    screen now also needs a jump to stand out against the series' own noise, and a jump is replayed
    only with the steps around it."""
    from stethoscope.diagnose.table import DENSE_LIMIT, Table
    from stethoscope.detect.config import DetectConfig

    rng = random.Random(3)
    n = DENSE_LIMIT + 30_000
    pts = []
    for s in range(n):
        loss = (2.0 + 4.0 * math.exp(-s / 5000)) * (1 + 0.2 * rng.uniform(-1, 1)) * (2.5 if 61_000 <= s < 61_003 else 1)
        pts += [Point(LOSS, s, loss), Point(GRAD_NORM, s, 0.3 * (1 + 0.2 * rng.uniform(-1, 1)))]
    run = ImportedRun("noisy", "x", pts)
    rows = Table.from_columns(run.columns).replay_rows(DetectConfig())
    assert rows.size < 9_000  # the sample (8,000) and a patch around the spike
    d = diagnose_run(run)
    serious = [f for f in d.findings if severity_rank(f.severity) >= severity_rank("warning")]
    assert [(f.type, f.step) for f in serious] == [("loss_spike", 61_000)], [f.message for f in serious]
