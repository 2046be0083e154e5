"""The nan finding names each series with the step it first went non-finite (user-trial-2 item 7): a NaN
in the weights at step 150 reaches the eval loss only at the next eval (199), not at step 150."""

from __future__ import annotations

import torch

from stethoscope.diagnose.engine import diagnose_records
from stethoscope.records import EVAL_LOSS, GRAD_NORM, LOSS, StepRecord

torch.set_num_threads(1)


def _run() -> list[StepRecord]:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x_eval = torch.randn(32, 4)
    out = []
    for step in range(200):
        if step == 150:
            with torch.no_grad():
                model.weight[0, 0] = float("nan")  # a corrupted weight: train loss and grads go NaN at once
        x = torch.randn(16, 4)
        loss = ((model(x) - x[:, :1]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
        opt.step()
        values = {LOSS: float(loss.detach()), GRAD_NORM: float(norm)}  # host sync
        if step % 50 == 49:
            with torch.no_grad():
                values[EVAL_LOSS] = float(((model(x_eval) - x_eval[:, :1]) ** 2).mean())  # host sync
        out.append(StepRecord(step, values))
    return out


def test_each_series_is_named_with_the_step_it_first_went_non_finite():
    (f,) = [f for f in diagnose_records(_run()) if f.type == "nan"]
    assert f.step == 150
    assert "train/loss, grad/norm at step 150 and eval/loss at step 199" in f.message, f.message
    assert "eval/loss at step 150" not in f.message
    assert f.evidence["first_steps"] == {LOSS: 150, GRAD_NORM: 150, EVAL_LOSS: 199}
