"""Console reader speed, issue 28.4 (second round): a progress bar's steps found from the lines where its counter
goes back (`console_segment.bar_steps`), and `twice_logged.once` without np.unique (whose first call imports
numpy.ma, ~6 ms of a Keras read that the Megatron reader's read never pays)."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from stethoscope.logtext.console_segment import bar_steps

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _reference(raw: np.ndarray, state: tuple[int, int, int] | None) -> tuple[np.ndarray, tuple[int, int, int]]:
    """bar_steps as it was (every line looked at), kept here to compare with."""
    offset, last, total = state or (0, 0, 0)
    raw = np.asarray(raw, dtype=np.int64)
    if not raw.size:
        return raw, (offset, last, total)
    totals = np.maximum.accumulate(np.concatenate(([total], raw)))
    top = totals[:-1]
    before = np.concatenate(([last], raw[:-1]))
    late = (raw < before) & (before >= top) & (top > 0) & (2 * raw > top)
    raw = np.where(late, top, raw)
    before = np.concatenate(([last], raw[:-1]))
    grow = np.where((raw < before) & (before >= top) & (top > 0), top, 0)
    offsets = offset + np.cumsum(grow)
    return offsets + raw, (int(offsets[-1]), int(raw[-1]), int(totals[-1]))


def _counters(rng: random.Random) -> list[int]:
    n = rng.randint(0, 40)
    if rng.random() < 0.5:  # epochs of a bar, a few lines redrawn late or out of place
        total, first = rng.randint(1, 12), rng.randint(0, 3)
        raw = [i % total + 1 for i in range(first, first + n)]
        for _ in range(rng.randint(0, 3)):
            if raw:
                raw[rng.randrange(len(raw))] = rng.randint(0, 14)
        return raw
    return [rng.randint(0, 10) for _ in range(n)]


@pytest.mark.parametrize("seed", range(4))
def test_bar_steps_are_the_ones_every_line_gave(seed: int) -> None:
    rng, late = random.Random(seed), 0
    for _ in range(5000):
        raw = _counters(rng)
        state = None if rng.random() < 0.3 else (rng.randint(0, 50), rng.randint(0, 12), rng.randint(0, 12))
        dtype = rng.choice([np.int64, np.int32])
        want, want_state = _reference(np.array(raw, dtype=dtype), state)
        got, got_state = bar_steps(np.array(raw, dtype=dtype), state)
        assert got_state == want_state, (raw, state)
        assert got.dtype == want.dtype and got.tolist() == want.tolist(), (raw, state)
        late += any(b < a and 2 * b > max(raw[:i]) for i, (a, b) in enumerate(zip(raw, raw[1:]), 1))
    assert late > 100  # the late-redraw path ran too


def test_epochs_of_a_bar_are_offset_by_the_epochs_before() -> None:
    steps, state = bar_steps(np.array([8, 9, 10, 1, 2, 10, 1]), (5, 7, 10))
    assert steps.tolist() == [13, 14, 15, 16, 17, 25, 26] and state == (25, 1, 10)


def test_reading_a_keras_log_does_not_import_numpy_ma(tmp_path: Path) -> None:
    """Keras' epoch-end line prints the step time before the loss: `once` looks into its step runs (np.unique
    there imported numpy.ma, a module the read needs nothing of)."""
    log = tmp_path / "keras.log"
    code = f"""
import random, sys
sys.path.insert(0, {str(BENCH)!r})
import import_speed
import numpy
from pathlib import Path
from stethoscope.importers.console import ConsoleImporter
rng = random.Random(3)
with open({str(log)!r}, "w") as f:
    for s in range(1, 50001):
        import_speed._keras(f, s, rng)
run = ConsoleImporter().read(Path({str(log)!r}))
assert "numpy.ma" not in sys.modules, "numpy.ma imported"
print(run.steps, run.n_points)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    steps, points = map(int, out.stdout.split())
    assert steps >= 40000 and points >= 2 * steps
