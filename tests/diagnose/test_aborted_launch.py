"""A first launch that sat on a plateau and was aborted, with the next launch appended to the same log and
learning (a real YOLOX train_log.txt: 14 launches, the first stuck at 4.75 -> 6.05 for 453 steps, the run then
learning 10.7 -> ~1.2 over 300 epochs): neither an `underfitting` verdict nor a plateau warning. A run that
stays at the plateau's level after the restart keeps its warning."""

from __future__ import annotations

import math
import random
from pathlib import Path

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers.registry import read_any
from stethoscope.records import severity_rank


def _launches(path: Path, learns_after: bool) -> Path:
    rng = random.Random(0)
    def lr(s: int, start: int) -> float:  # each launch warms its LR up from 0 again, as YOLOX does
        return 1e-3 * min(1.0, (s - start + 10) / 200)

    lines = [f"step {s} | loss {5.0 * (1 + 0.1 * rng.gauss(0, 1)):.3f} | lr {lr(s, 10):.3g}" for s in range(10, 460, 10)]
    lines.append("Traceback (most recent call last): KeyboardInterrupt")
    for s in range(430, 14_000, 10):  # the next launch, appended, resumed from a checkpoint at step 430
        level = 1.2 + 3.8 * math.exp(-(s - 430) / 1500) if learns_after else 5.0
        lines.append(f"step {s} | loss {level * (1 + 0.1 * rng.gauss(0, 1)):.3f} | lr {lr(s, 430):.3g}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _serious(path: Path) -> list:
    return [f for f in diagnose_run(read_any(path)[0]).findings if severity_rank(f.severity) >= 1]


def test_an_aborted_first_launch_is_no_verdict_on_the_run(tmp_path: Path) -> None:
    serious = _serious(_launches(tmp_path / "train.log", learns_after=True))
    assert not [f for f in serious if f.type in ("underfitting", "plateau")], [f.message for f in serious]


def test_a_run_that_stays_stuck_after_the_restart_keeps_its_warning(tmp_path: Path) -> None:
    serious = _serious(_launches(tmp_path / "train.log", learns_after=False))
    assert [f for f in serious if f.type in ("underfitting", "plateau")], [f.message for f in serious]


def test_a_short_resume_at_the_end_is_no_verdict_on_a_run_that_learned(tmp_path: Path) -> None:
    """A real metrics.jsonl: two launches that died at steps 20 and 40, a run 20 -> 7580 (8.56 -> 2.1), then two
    short resumes from 7520 (3 and 13 records). The curve of the last session is flat; the run is not 'never came down'."""
    import json

    rng = random.Random(0)
    def launch(first: int, last: int, level: float | None = None) -> list[dict]:
        return [{"step": s, "loss": (2.1 + 6.45 * math.exp(-s / 800) if level is None else level)
                 + rng.gauss(0, 0.03), "lr": 6e-4} for s in range(first, last + 1, 20)]

    rows = launch(20, 20) + launch(20, 40) + launch(20, 7580) + launch(7520, 7560, 2.18) + launch(7520, 7760, 2.18)
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert not [f for f in _serious(path) if f.type in ("underfitting", "plateau")]
