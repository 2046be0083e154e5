"""Helpers for detector tests: build records, replay a detector, load golden `step value` curves."""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from pathlib import Path

from stethoscope import records as R
from stethoscope.detect.registry import DetectorSet, merge_findings
from stethoscope.records import Finding, StepRecord

CURVES = Path(__file__).resolve().parents[1] / "assets" / "curves"


def load_curve(name: str) -> list[tuple[int, float]]:
    """A golden curve: one `step value` pair per line, `#` comments allowed."""
    out = []
    for line in (CURVES / name).read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            step, value = line.split()
            out.append((int(step), float(value)))
    return out


def make_records(steps: Sequence[int], **series: Sequence[float | None]) -> list[StepRecord]:
    """Records from parallel sequences; keyword names are metric constants' attribute names (LOSS=...)."""
    names = {k: getattr(R, k) for k in series}
    out = []
    for i, s in enumerate(steps):
        values = {names[k]: v[i] for k, v in series.items() if v[i] is not None}
        out.append(StepRecord(s, values))
    return out


def replay(detector, records: Iterable[StepRecord], finish: bool = True) -> list[Finding]:
    """Run a detector (or DetectorSet) over records; finish and merge follow-ups like the engine does."""
    found: list[Finding] = []
    for r in records:
        found += detector.update(r)
    if finish and hasattr(detector, "finish"):
        found += detector.finish()
    return merge_findings(found)


def replay_loss(values: Sequence[float]) -> list[Finding]:
    """The default detectors' merged findings over a loss series, one record a step from 0."""
    return replay(DetectorSet(), (StepRecord(i, {R.LOSS: v}) for i, v in enumerate(values)))


def replay_set(records: Iterable[StepRecord], **config) -> list[Finding]:
    from stethoscope.detect.config import DetectConfig

    return replay(DetectorSet(config=DetectConfig(**config), strict=True), records)


def of_type(findings: Iterable[Finding], *types: str) -> list[Finding]:
    return [f for f in findings if f.type in types]


def serious(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if R.severity_rank(f.severity) >= 1]


def healthy_run(n: int = 3000, seed: int = 0, every: int = 1, warmup: int = 200) -> list[StepRecord]:
    """A noisy but healthy pre-training curve: warm-up, cosine LR, loss decaying with 3% noise,
    grad norm high and jumpy in warm-up then settling, occasional harmless grad blips."""
    rng = random.Random(seed)
    out = []
    for s in range(0, n, every):
        lr = 3e-4 * min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * s / n))
        loss = (2.5 + 8.0 * math.exp(-s / 400)) * (1 + rng.gauss(0, 0.03))
        g = (1.0 + 6.0 * math.exp(-s / 100)) * math.exp(rng.gauss(0, 0.15))
        if rng.random() < 0.01:
            g *= 2.5  # a harmless blip
        values = {R.LOSS: loss, R.LR: lr, R.GRAD_NORM: g, R.STEP_TIME: 0.02 * (1 + abs(rng.gauss(0, 0.02)))}
        if s % 500 == 499:
            values[R.EVAL_LOSS] = loss + 0.1
        out.append(StepRecord(s, values))
    return out
