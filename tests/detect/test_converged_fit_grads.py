"""A fit at its floor is not vanishing gradients (user-trial-2 item 5): an exact linear regression whose loss
went to ~0 has a ~0 gradient by itself; a gradient that vanishes while the loss stays high is still a warning."""

from __future__ import annotations

import torch

from stethoscope.diagnose.engine import diagnose_records
from stethoscope.records import GRAD_NORM, LOSS, StepRecord

torch.set_num_threads(1)


def _train(target: str, freeze_at: int | None = None, steps: int = 200) -> list[StepRecord]:
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    out = []
    for step in range(steps):
        if step == freeze_at:
            for p in model.parameters():
                p.requires_grad_(False)
        x = torch.randn(16, 8)
        y = x[:, :1] if target == "exact" else torch.randn(16, 1)  # noise: a loss floor near 1
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        if loss.requires_grad:
            loss.backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None and p.requires_grad]
        norm = float(torch.nn.utils.get_total_norm(grads)) if grads else 0.0  # host sync
        opt.step()
        out.append(StepRecord(step, {LOSS: float(loss.detach()), GRAD_NORM: norm}))  # host sync
    return out


def test_an_exact_fit_whose_loss_went_to_zero_is_info_not_vanishing_gradients():
    findings = diagnose_records(_train("exact"))
    assert not [f for f in findings if f.type == "grad_vanishing"], "named by what it is: a converged fit"
    found = [f for f in findings if f.evidence.get("non_problem") == "converged_fit"]
    assert found, "the grad norm fell x1000: the detector still records it"
    (f,) = found
    assert (f.type, f.severity) == ("healthy", "info"), f.message
    assert "converged" in f.message and "vanish" not in f.message.replace("not vanishing", "")
    assert f.evidence["loss"] <= 0.01 * f.evidence["loss_before"]
    assert f.causes and "converged" in f.causes[0] and not any("frozen" in c for c in f.causes)
    assert len(f.causes) == len(f.fixes)


def test_gradients_gone_while_the_loss_stays_high_still_warn():
    (f,) = [f for f in diagnose_records(_train("noise", freeze_at=100)) if f.type == "grad_vanishing"]
    assert f.severity == "warning", f.message
    assert "gradients vanish or the model is frozen" in f.message
    assert any("frozen" in c for c in f.causes)
