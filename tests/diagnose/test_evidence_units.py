"""Every number a finding quotes is in its series' own unit and magnitude, checked against the series
the importer read (issue: "step time up 136% (0.0019 -> 0.0044 s)" on a log of 20-320 ms steps)."""

from __future__ import annotations

import math
import random
import re
from pathlib import Path

import pytest

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers.registry import read_any
from stethoscope.records import GRAD_NORM, LOSS, STEP_TIME

# evidence key -> the series it quotes, per finding type
QUOTES = {
    "loss_spike": {"level": LOSS, "value": LOSS, "peak": LOSS},
    "divergence": {"level_before": LOSS, "peak": LOSS, "last": LOSS},
    "grad_explosion": {"level": GRAD_NORM, "first": GRAD_NORM, "peak": GRAD_NORM},
    "grad_spike": {"level": GRAD_NORM, "first": GRAD_NORM, "peak": GRAD_NORM},
    "plateau": {"start_level": LOSS, "level": LOSS, "loss_before": LOSS, "loss_now": LOSS},
    "underfitting": {"start_level": LOSS, "level": LOSS},
    "throughput_drop": {"level": STEP_TIME, "slow_level": STEP_TIME},
}


def _megatron(path: Path, fault: str, n: int = 1500, batch: int = 512) -> Path:
    """Megatron-LM iteration lines: step time in ms, a global batch of 512 (the detector compares the
    time per sample inside; what it quotes must be seconds per step)."""
    rng = random.Random(hash(fault) % 1000)
    lines = []
    for it in range(1, n + 1):
        lr = 3e-4 * (30 if fault == "lr_jump" and it >= 700 else 1) * (0 if fault == "lr_zero" and it >= 700 else 1)
        loss = 2.0 + 3.0 * math.exp(-it / 300) if fault != "flat" else 6.9
        loss *= 2.5 if fault == "lr_jump" and it >= 700 else 1.0
        loss *= 3.0 if fault == "spike" and it == 800 else 1.0
        gn = 0.5 * (40 if fault == "lr_jump" and 700 <= it < 720 else 1) * (1 + 0.05 * rng.random())
        ms = (250.0 if fault == "slow" and it >= 700 else 100.0) * (1 + 0.05 * rng.random())
        ms *= 3.0 if fault == "slow_phases" and it > 200 and it % 150 < 30 else 1.0
        lines.append(f" iteration {it:8d}/{n:8d} | consumed samples: {it * batch:12d} | elapsed time per iteration "
                     f"(ms): {ms:.1f} | learning rate: {lr:.3E} | global batch size: {batch:5d} | lm loss: "
                     f"{loss + rng.gauss(0, 0.01):.6E} | loss scale: 1.0 | grad norm: {gn:.3f} | "
                     "number of skipped iterations:   0 | number of nan iterations:   0 |")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("fault,expected", [("slow", "throughput_drop"), ("spike", "loss_spike"),
                                            ("lr_jump", "divergence"), ("lr_zero", "plateau"),
                                            ("flat", "underfitting")])
def test_every_quoted_number_is_in_the_series_unit(tmp_path, fault, expected):
    (run,) = read_any(_megatron(tmp_path / "train.log", fault))
    values: dict[str, list[float]] = {}
    for p in run.points:
        if math.isfinite(p.value):
            values.setdefault(p.name, []).append(p.value)
    d = diagnose_run(run)
    assert expected in {f.type for f in d.findings}, [(f.type, f.message) for f in d.findings]
    checked = 0
    for f in d.findings:
        for key, name in QUOTES.get(f.type, {}).items():
            v = f.evidence.get(key)
            if not isinstance(v, (int, float)) or name not in values:
                continue
            lo, hi = min(values[name]), max(values[name])
            assert lo * 0.99 <= v <= hi * 1.01, f"{f.type}.{key}={v} is outside {name} [{lo}, {hi}]: {f.message}"
            checked += 1
    assert checked, "no quoted number was checked"
    if expected == "throughput_drop":
        (drop,) = [f for f in d.findings if f.type == "throughput_drop"]
        quoted = [float(x) for x in re.findall(r"\(([\d.]+) -> ([\d.]+) s\)", drop.message)[0]]
        assert 0.09 <= quoted[0] <= 0.11 and 0.24 <= quoted[1] <= 0.27, drop.message
        assert drop.severity == "warning" and drop.evidence["typical_spread"] < 0.1


def test_a_stall_of_many_records_is_sized_by_its_slowest_step_not_its_total(tmp_path):
    """Slow phases of ~30 steps that pass (a busy shared machine) are stalls priced by their whole excess;
    their size was that excess as if one step had taken it ("up to x121 the usual time" on a log whose
    steps vary x3.4 at most)."""
    (run,) = read_any(_megatron(tmp_path / "train.log", "slow_phases"))
    times = [p.value for p in run.points if p.name == STEP_TIME]
    worst = max(times) / min(times)
    stalls = [f for f in diagnose_run(run).findings if f.type == "periodic_stall" and f.evidence["dips"] > 1]
    assert stalls
    for f in stalls:
        assert 1 < f.evidence["worst_ratio"] <= worst, f.message
        shown = float(re.search(r"up to x([\d.]+)", f.message).group(1))
        assert shown <= worst * 1.01, f.message
