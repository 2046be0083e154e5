"""A run that ended with an exception (`show`: status `failed: RuntimeError: …`) was 'run: healthy' with no
finding in `diagnose`, the report and the dashboard (user-trial-3). Its status is now a finding of the run's
incidents, named as `stethoscope explain` names it, at the run's last step. Real torch training, real store."""

from __future__ import annotations

import pytest
import torch
from click.testing import CliRunner

from stethoscope import Monitor
from stethoscope.cli.main import cli
from stethoscope.diagnose.stored import incidents_at

torch.set_num_threads(1)


def _train(run, error: BaseException) -> None:
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(type(error)), Monitor(str(run), model=model, optimizer=opt, serve=False) as mon:
        for step in range(40):
            x = torch.randn(16, 8, generator=torch.Generator().manual_seed(step))
            loss = ((model(x) - x[:, :1]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            mon.step(step, loss=loss)
            if step == 30:
                raise error


def test_a_run_that_raised_has_its_failure_as_a_finding_in_every_view(tmp_path):
    _train(tmp_path / "a", RuntimeError("CUDA error: device-side assert triggered"))
    (d,) = incidents_at(tmp_path / "a")
    crash = [f for f in d.findings if f.type == "crash"]
    assert len(crash) == 1 and crash[0].severity == "error" and crash[0].step == 30
    assert "device-side assert" in crash[0].message and "CUDA_LAUNCH_BLOCKING" in " ".join(crash[0].fixes)
    out = CliRunner().invoke(cli, ["diagnose", str(tmp_path / "a")]).output
    assert "ERROR  crash at step 30" in out
    _train(tmp_path / "b", ValueError("labels must be < vocab_size"))  # one explain does not know: said as it is
    (d,) = incidents_at(tmp_path / "b")
    assert [f.message for f in d.findings if f.type == "crash"] == [
        "the run ended with an exception: ValueError: labels must be < vocab_size"]


def test_an_interrupted_run_is_no_failure(tmp_path):
    _train(tmp_path / "c", KeyboardInterrupt())
    (d,) = incidents_at(tmp_path / "c")
    assert not [f for f in d.findings if f.type == "crash"]
