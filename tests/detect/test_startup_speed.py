"""A run whose first records ran faster than the rest has not slowed down: start-up is not its usual speed.

maskrcnn-benchmark prints every 20 iterations `time: 0.5212 (0.5591)` (the median of the last 20, and the
global mean). Early iterations carry fewer proposals and masks and run at the LR warm-up's small steps; a
real log went 0.52 s (iterations 20-120) -> 0.67 s by 1,000 and stayed ~0.69 s for 40,000 iterations, and
read "WARNING throughput_drop from step 140 ... costing 20%". A baseline of fewer records than a slowdown
needs to persist, in a log that starts at the run's start, is the start-up: the drop against it is info and
says so. The same slowdown after a level the run held for many records stays a warning, and so does one in
an excerpt that starts mid-run (tests/detect/test_amp_throughput_memory.py: BLOOM's slow GPU, 3 records before).
"""

from __future__ import annotations

import random
from pathlib import Path

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers.registry import read_any
from stethoscope.records import severity_rank


def _maskrcnn_console(path: Path, ramp_from: int, last: int = 16_000) -> Path:
    """maskrcnn-benchmark's MetricLogger lines; the step time ramps 0.52 -> 0.69 s over 860 iterations."""
    rng = random.Random(2)
    lines, total = [], 0.0
    for i, it in enumerate(range(20, last + 1, 20), start=1):
        grown = min(1.0, max(0.0, (it - ramp_from) / 860))
        t = (0.52 + 0.17 * grown) * (1 + 0.02 * rng.gauss(0, 1))
        total += t
        loss = 0.4 + 1.8 / (1 + it / 300)
        eta = int((last - it) * t)
        lines.append(f"2020-02-28 16:{i // 60 % 60:02d}:{i % 60:02d},732 maskrcnn_benchmark.trainer INFO: eta: "
                     f"{eta // 3600}:{eta // 60 % 60:02d}:{eta % 60:02d}  iter: {it}  loss: {loss:.4f} ({loss * 1.1:.4f})  "
                     f"loss_classifier: {0.2 * loss:.4f} ({0.22 * loss:.4f})  loss_mask: {0.3 * loss:.4f} ({0.33 * loss:.4f})  "
                     f"time: {t:.4f} ({total / i:.4f})  data: 0.0220 (0.0230)  lr: {0.01 * min(1.0, it / 500):.6f}  "
                     "max mem: 5048")
    path.write_text("\n".join(lines) + "\n")
    return path


def _throughput(path: Path) -> list:
    return [f for f in diagnose_run(read_any(path)[0]).findings if f.type == "throughput_drop"]


def test_a_faster_start_up_is_no_slowdown(tmp_path: Path) -> None:
    found = _throughput(_maskrcnn_console(tmp_path / "log.txt", ramp_from=130))
    assert found, "the ramp is still reported (as info)"
    assert not [f for f in found if severity_rank(f.severity) >= 1], [(f.severity, f.message) for f in found]
    assert "start-up" in found[0].message and found[0].evidence["startup_records"] < 20, found[0].message


def test_a_slowdown_after_a_level_the_run_held_stays_a_warning(tmp_path: Path) -> None:
    found = _throughput(_maskrcnn_console(tmp_path / "log.txt", ramp_from=2_010))
    assert [f for f in found if severity_rank(f.severity) >= 1], [(f.severity, f.message) for f in found]
    assert all("start-up" not in f.message for f in found)
