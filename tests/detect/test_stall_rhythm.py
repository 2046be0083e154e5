"""A data loader that starts stalling every P steps after a busy stretch of scattered slow steps: its stalls
are a rhythm of their own, dated where the rhythm began (`detect.stall_patterns.beat_start`), not folded
into the scattered pattern before it; a regular pattern that misses a beat is not split."""

from __future__ import annotations

import random
from pathlib import Path

from stethoscope.detect.stall_patterns import beat_start
from stethoscope.detect.throughput import ThroughputDetector
from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers.registry import read_any

from .conftest import make_records, replay

GPT_RUNS = Path(__file__).resolve().parents[1] / "assets" / "gpt_runs"


def _busy_then_loader(seed: int) -> list[float]:
    """10 ms steps +-5%; from step 100 a busy machine makes one step in ~12 2-4x slow; from step 265 the data
    loader stalls 150 ms every 8 steps."""
    rng = random.Random(seed)
    times = []
    for step in range(400):
        t = 0.010 * rng.uniform(0.95, 1.05)
        if 100 <= step < 265 and rng.random() < 1 / 12:
            t *= rng.uniform(2.0, 4.0)
        if step >= 265 and (step - 265) % 8 == 0:
            t += 0.150
        times.append(t)
    return times


def test_a_loader_rhythm_after_scattered_stalls_is_dated_where_it_began() -> None:
    for seed in range(3):
        found = replay(ThroughputDetector(), make_records(range(400), STEP_TIME=_busy_then_loader(seed)))
        stalls = [f for f in found if f.type == "periodic_stall"]
        assert any(abs(f.step - 265) <= 2 for f in stalls), (seed, [(f.step, f.message[:60]) for f in stalls])


def test_a_regular_pattern_that_misses_a_beat_is_not_split() -> None:
    items = [[s, 0.1, 5.0, []] for s in range(20, 400, 20) if s != 200]  # a GC every 20 steps, one beat missed
    assert beat_start(items) is None
    rng = random.Random(4)
    times = [0.010 * rng.uniform(0.95, 1.05) + (0.08 if s % 20 == 0 and s != 200 else 0.0) for s in range(400)]
    stalls = [f for f in replay(ThroughputDetector(), make_records(range(400), STEP_TIME=times))
              if f.type == "periodic_stall"]
    assert [f.step for f in stalls] == [20], [(f.step, f.message[:60]) for f in stalls]


def test_a_real_tiny_gpt_loader_stall_after_a_busy_stretch_is_dated_at_its_onset() -> None:
    # bench/gpt_runs stall-s2 (dev), W&B history: a busy machine's 2-6x slow steps from step 117, then the
    # loader sleeps 0.17 s every 8 iterations from 265. The stalls were folded into a pattern keyed at 117.
    (run,) = read_any(GPT_RUNS / "stall-s2" / "wandb-history.jsonl.gz")
    stalls = [f.step for f in diagnose_run(run).findings if f.type == "periodic_stall"]
    assert any(abs(s - 265) <= 2 for s in stalls), stalls


def test_a_rhythm_of_one_step_ends_its_walk():
    """Stalls on consecutive steps (a period of 1, tolerance 1): the walk back along the chain took each stall
    as its own predecessor and never ended (`diagnose` of a live run hung)."""
    from stethoscope.detect.stall_patterns import beat_start

    items = [[s, 1.0] for s in (3, 10, 11, 12, 13, 14, 15)]
    assert beat_start(items) in (None, 10)
