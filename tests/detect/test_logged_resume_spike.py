"""A spike right after a resume the log names in words (`diagnose.resumes.at_logged_resumes`).

wild-logs-5 F4: a T5 console (`Epoch 3, Global Batch 7013, Training Loss: 2.4331, ...`) restarted from its
checkpoint (`Loaded checkpoint from checkpoints/checkpoint.pth.`) and went on at `Global Batch 7015` with one record
at 8.77 (x3.37), back at the next. The step counter went forward, so the detectors saw no resume: WARNING loss_spike.
A spike that came back, right after a line saying the run resumed from a checkpoint, is the resume's (info), as it
is at a resume the steps show. The same spike with no such line (or after "Checkpoint saved") stays a warning.
"""

from __future__ import annotations

import random
from pathlib import Path

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers.registry import read_any

from .conftest import of_type


def _console(path: Path, note: str | None) -> Path:
    rng = random.Random(0)
    lines = []
    sec = 0
    for i, step in enumerate(range(5, 3005, 5)):
        loss = 2.6 + rng.gauss(0, 0.15)
        if step == 2000 and note:
            lines.append(f"2024-11-08 15:49:{sec % 60:02d},217 - INFO - {note}")
        if step == 2005:
            loss = 8.77
        sec += 1
        lines.append(f"2024-11-08 15:{(sec // 60) % 60:02d}:{sec % 60:02d},704 - INFO - Epoch {i // 100}, Global Batch "
                     f"{step}, Training Loss: {loss:.4f}, Validation Loss: 0.4893, Validation Accuracy: 0.0000")
    path.write_text("\n".join(lines) + "\n")
    return path


def _spikes(path: Path) -> list:
    (run,) = read_any(path)
    return [f for f in of_type(diagnose_run(run).findings, "loss_spike") if f.step == 2005]


def test_a_spike_right_after_a_logged_resume_is_the_resumes(tmp_path: Path) -> None:
    (f,) = _spikes(_console(tmp_path / "training.log", "Loaded checkpoint from checkpoints/checkpoint.pth."))
    assert f.severity == "info" and f.evidence.get("logged_resume") is True, f


def test_the_same_spike_with_no_resume_is_a_warning(tmp_path: Path) -> None:
    (f,) = _spikes(_console(tmp_path / "training.log", "Checkpoint saved to checkpoints/checkpoint.pth"))
    assert f.severity == "warning" and "logged_resume" not in f.evidence, f
