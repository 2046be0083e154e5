"""A resumed run: nothing recorded at step 0 (the Monitor knows no step before the first `step`), its start kept."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from stethoscope import Monitor  # noqa: E402
from stethoscope.store.query import open_run  # noqa: E402

torch.set_num_threads(1)


def _train(mon: Monitor, model: torch.nn.Module, opt: torch.optim.Optimizer, steps: range) -> None:
    for step in steps:
        x = torch.randn(8, 4)
        loss = ((model(x) - x[:, :1]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        mon.step(step, loss=loss)


def test_restoring_state_before_the_first_step_records_no_step_zero(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with Monitor(tmp_path / "run", model=model, optimizer=opt, serve=False) as mon:
        _train(mon, model, opt, range(1, 11))  # steps counted from 1, as the HF Trainer and Lightning do
        state = mon.state_dict()
    with Monitor(tmp_path / "run", model=model, optimizer=opt, serve=False, resume=True) as mon:
        mon.load_state_dict(state)  # what the HF and Lightning callbacks do before the first resumed step (it flushes)
        _train(mon, model, opt, range(11, 21))
    with open_run(tmp_path / "run") as run:
        _, rows = run.query("SELECT name, COUNT(*) FROM metrics WHERE step = 0 GROUP BY name")
        steps = run.query("SELECT COUNT(DISTINCT step) FROM metrics")[1][0][0]
    assert rows == []  # the system sample was stamped step 0 (a point far left of the curve, "21 steps logged")
    assert steps == 20


def test_a_resumed_run_keeps_its_start_time(tmp_path):
    """show printed 'started' at the resume and a duration of the last session only (0.05 s for a run of 6 s)."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with Monitor(tmp_path / "run", model=model, optimizer=opt, serve=False) as mon:
        _train(mon, model, opt, range(1, 11))
    with open_run(tmp_path / "run") as run:
        first = float(run.meta()["start_time"])
    with Monitor(tmp_path / "run", model=model, optimizer=opt, serve=False, resume=True) as mon:
        _train(mon, model, opt, range(11, 21))
    with open_run(tmp_path / "run") as run:
        meta = run.meta()
    assert float(meta["start_time"]) == first
    assert float(meta["resume_time"]) >= first and float(meta["end_time"]) >= float(meta["resume_time"])
    on_disk = json.loads((tmp_path / "run" / "run.json").read_text())
    assert on_disk["start_time"] == first and on_disk["resume_time"] == float(meta["resume_time"])
