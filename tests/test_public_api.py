from __future__ import annotations

import subprocess
import sys
import textwrap

import stethoscope
from tests.conftest import REPO


def test_all_is_short_sorted_and_resolves():
    assert stethoscope.__all__ == sorted(stethoscope.__all__)
    assert set(stethoscope.__all__) == {"Checkpoints", "Control", "Finding", "Monitor", "MonitorConfig", "Recovery", "__version__",
                                         "open_run"}
    for name in stethoscope.__all__:
        assert getattr(stethoscope, name) is not None


def test_import_loads_no_torch_no_server_no_thread():
    code = textwrap.dedent("""
        import sys, threading
        before = threading.active_count()
        import stethoscope
        heavy = [m for m in ("torch", "transformers", "lightning", "http.server", "plotly", "tensorboard",
                             "numpy", "stethoscope.capture.monitor", "stethoscope.serve") if m in sys.modules]
        assert not heavy, heavy
        assert threading.active_count() == before, threading.enumerate()
        stethoscope.Monitor  # resolving the name still loads no torch
        assert "torch" not in sys.modules
        print("ok")
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr
