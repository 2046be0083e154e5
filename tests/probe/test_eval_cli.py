"""`stethoscope probe RUN eval CODE` over real HTTP on 127.0.0.1: the example in docs/probe.md works in a
process that never imported gc, and code that raises fails the command (exit 1, traceback on stderr)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from stethoscope import Monitor
from stethoscope.cli.main import cli
from stethoscope.probe import ProbeConfig
from stethoscope.probe.live import run_code

torch = pytest.importorskip("torch")


def test_eval_has_the_standard_modules_and_the_loaded_ones():
    got = run_code("len(gc.get_objects()) > 0, torch.__name__, sys.version_info.major", {})
    assert got["error"] is None and got["value"] == "(True, 'torch', 3)", got


def test_probe_eval_of_the_readme_example_and_a_failing_eval(tmp_path):
    torch.set_num_threads(1)
    model = torch.nn.Linear(4, 1)
    with Monitor(tmp_path / "run", strict=True, serve=ProbeConfig(allow_eval=True)) as mon:
        for step in range(3):
            mon.step(step, loss=model(torch.randn(8, 4)).pow(2).mean())
        mon.flush()
        ok = CliRunner().invoke(cli, ["probe", str(mon.run_dir), "eval", "len(gc.get_objects())"])
        bad = CliRunner().invoke(cli, ["probe", str(mon.run_dir), "eval", "1 / 0"])
        stmt = CliRunner().invoke(cli, ["probe", str(mon.run_dir), "eval", "x = 1"])
    assert ok.exit_code == 0 and int(ok.stdout.strip()) > 1000, ok.output
    assert bad.exit_code == 1 and "ZeroDivisionError" in bad.stderr and not bad.stdout.strip()
    assert stmt.exit_code == 0  # statements with no value succeed quietly
