"""A Monitor the script never closed is closed at interpreter exit with what is true of the run's end: the uncaught
exception the script died of (`failed: …`, as `with Monitor(...)` writes it, so `show` and `diagnose` name the
crash), or `closed at interpreter exit` when the script ended without `close()` (user-trial-4: both read
"interpreter exit"). Real subprocesses, real stores."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

from stethoscope.cli.main import cli
from stethoscope.store.query import open_run
from tests.conftest import REPO

SCRIPT = (
    "import sys\n"
    "from stethoscope import Monitor\n"
    "mon = Monitor(sys.argv[1], serve=False, flush_interval=0.05)\n"
    "for i in range(30):\n"
    "    mon.step(i, loss=2.0 / (1 + i))\n"
    "{end}\n"
)


def _run(tmp_path, end: str):
    res = subprocess.run([sys.executable, "-c", SCRIPT.format(end=end), str(tmp_path / "run")], capture_output=True,
                         text=True, timeout=120, cwd=REPO,
                         env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    with open_run(tmp_path / "run") as r:
        return res, r.meta()["status"]


def test_a_script_that_died_records_the_exception(tmp_path):
    res, status = _run(tmp_path, "raise RuntimeError('CUDA error: an illegal memory access')")
    assert res.returncode == 1 and "RuntimeError" in res.stderr
    assert status == "failed: RuntimeError: CUDA error: an illegal memory access"
    out = CliRunner().invoke(cli, ["diagnose", str(tmp_path / "run")]).output
    assert "healthy" not in out and "illegal memory access" in out, out


def test_a_clean_exit_without_close_says_so(tmp_path):
    res, status = _run(tmp_path, "print('trained')")
    assert res.returncode == 0 and res.stdout.strip() == "trained", res.stderr
    assert status == "closed at interpreter exit"


def test_an_exception_handled_before_the_run_is_not_its_end(tmp_path):
    # an error already printed before the Monitor started (a REPL's, a notebook's) is no crash of this run
    end = "print('trained')"
    before = "import sys\ntry:\n    1 / 0\nexcept ZeroDivisionError as e:\n    sys.last_value = e\n"
    script = before + SCRIPT.format(end=end)
    res = subprocess.run([sys.executable, "-c", script, str(tmp_path / "run")], capture_output=True, text=True,
                         timeout=120, cwd=REPO, env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr
    with open_run(tmp_path / "run") as r:
        assert r.meta()["status"] == "closed at interpreter exit"
