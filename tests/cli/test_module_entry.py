"""`python -m stethoscope` is the `stethoscope` command (bench scripts and checkouts on PYTHONPATH use it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def test_python_dash_m_runs_the_command_line(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("".join(f"step {s} | loss {4.0 / (1 + s / 50):.4f}\n" for s in range(1, 201)))
    out = subprocess.run([sys.executable, "-m", "stethoscope", "diagnose", str(log), "--json"],
                         capture_output=True, text=True, env={"PYTHONPATH": str(SRC), "PATH": ""}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert '"findings"' in out.stdout
    bad = subprocess.run([sys.executable, "-m", "stethoscope", "diagnose", str(tmp_path / "missing.log")],
                         capture_output=True, text=True, env={"PYTHONPATH": str(SRC), "PATH": ""}, timeout=120)
    assert bad.returncode == 2 and "missing.log" in bad.stderr + bad.stdout and "Traceback" not in bad.stderr
