"""`stethoscope debug RUN` on a real recorded run, and `stethoscope.debug` importing without torch."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import REPO, run_cli

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def nan_run(tmp_path_factory):
    from stethoscope import Monitor
    from tests.debug.models import batch, mse, net

    class WithLoss(torch.nn.Module):  # model(x, y) -> loss: debug_nonfinite=True needs no loss_fn
        def __init__(self) -> None:
            super().__init__()
            self.net = net()

        def forward(self, x, y):
            return mse(self.net(x), y)

    path = tmp_path_factory.mktemp("cli") / "run"
    model = WithLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with Monitor(path, model=model, optimizer=opt, strict=True, log_every=4, debug_nonfinite=True) as mon:
        for i in range(10):
            x, y = batch(i)
            if i == 6:
                x = x.clone()
                x[1, 1] = float("nan")
            loss = model(x, y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            mon.step(i, loss=loss, batch=(x, y), batch_ids=[f"s{i}-{k}" for k in range(16)])
    return path


def test_debug_prints_the_stored_report_the_checks_and_the_call(nan_run, cli_env):
    res = run_cli("debug", str(nan_run), env=cli_env)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "nan at step 6" in out
    assert "re-run by the Monitor: the batch already held NaN/Inf (batch[0])" in out
    assert "1. check the batch" in out and "4. check the numerics" in out
    assert "workflow({'type': 'nan', 'step': 6}" in out and "from stethoscope.debug import workflow" in out


def test_debug_json_and_step(nan_run, cli_env):
    res = run_cli("debug", str(nan_run), "--step", "7", "--json", env=cli_env)
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    [f] = d["findings"]
    assert f["type"] == "nan" and f["step"] == 6 and f["stored_report"]["inputs_nonfinite"] == ["batch[0]"]
    assert f["stored_report"]["first_output"]["name"] == "net.inp"
    assert [c["title"] for c in d["checks"]][0] == "check the batch"
    res = run_cli("debug", str(nan_run), "--step", "0", env=cli_env)
    assert res.returncode == 2 and "no NaN, loss spike or divergence finding at or before step 0" in res.stderr
    assert "Traceback" not in res.stderr


def test_debug_on_a_missing_run_is_one_line(tmp_path, cli_env):
    res = run_cli("debug", str(tmp_path / "nope"), env=cli_env)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1


def test_the_debug_package_imports_without_torch_and_its_functions_stay_functions():
    code = textwrap.dedent("""
        import sys
        import stethoscope.debug as d
        for m in ("examples", "forward", "grads", "history", "nonfinite", "numeric", "steps", "stored", "watch", "workflows"):
            __import__("stethoscope.debug." + m)
        assert "torch" not in sys.modules, "torch imported"
        assert all(callable(getattr(d, n)) for n in ("gradients", "numerics", "workflow", "locate_nonfinite"))
        assert type(d.gradients).__name__ == "function" and type(d.workflow).__name__ == "function"
        assert d.__all__ == sorted(d._LAZY) and all(getattr(d, n) is not None for n in d.__all__)
        print("ok")
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr
