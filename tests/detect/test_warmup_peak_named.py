"""A spike after warm-up names the warm-up's peak LR, not an off-schedule jump above it (the jump is its own cause)."""

from __future__ import annotations

import random
from pathlib import Path

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.findings.catalogue import LOSS_SPIKE
from stethoscope.importers import read_any


def test_the_spike_names_the_warmup_peak_and_the_jump_apart(tmp_path: Path) -> None:
    rng = random.Random(1)
    lines = []
    for s in range(300):
        lr = 0.003 * (s + 1) / 50 if s < 50 else (0.3 if s >= 150 else 0.003)
        loss = 2.0 + rng.gauss(0, 0.02) + (6.0 if s == 152 else 0.0)
        lines.append(f"step {s} | loss {loss:.4f} | lr {lr:g}")
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    (run,) = read_any(path)
    # the spike, or the LR jump's incident that owns it as a symptom (trust-4: the cause is the root)
    (spike,) = [f for f in diagnose_run(run).findings if f.type == LOSS_SPIKE
                or any(s["type"] == LOSS_SPIKE for s in f.symptoms)]
    assert any(c.startswith("LR jumped 0.003 -> 0.3 (x100) at step 150, 2 steps before") for c in spike.causes)
    (after,) = [c for c in spike.causes if "after LR warm-up ended" in c]
    assert "(peak LR 0.003)" in after
