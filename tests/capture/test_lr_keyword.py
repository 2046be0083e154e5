"""`mon.step(step, loss=..., lr=sched.get_last_lr()[0])`, the natural way to pass the LR, records the run's LR
(`opt/lr`, charted as the learning rate), not a series named `lr` drawn among "other" charts (user-trial-2 item 11)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from stethoscope import Monitor  # noqa: E402
from stethoscope import records as R  # noqa: E402
from stethoscope.store.query import open_run  # noqa: E402


@pytest.mark.parametrize("key", ["lr", "learning_rate"])
def test_an_lr_passed_to_step_is_the_runs_lr_and_wins_over_the_optimizers(tmp_path, key):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    passed = []
    with Monitor(tmp_path, model=model, optimizer=opt, strict=True) as mon:
        for i in range(8):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            passed.append(sched.get_last_lr()[0] * 2)  # not the optimizer's: the one passed must be the one kept
            mon.step(i, loss=loss, **{key: passed[-1]})
            sched.step()
    with open_run(tmp_path) as r:
        steps, lrs = r.series(R.LR)
        assert steps == list(range(8)) and lrs == pytest.approx(passed)
        assert r.query("SELECT count(*) FROM metrics WHERE name = ?", (key,))[1] == [(0,)]
