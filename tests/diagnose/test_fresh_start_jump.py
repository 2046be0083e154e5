"""A jump in a fresh model's first updates is not blamed on a checkpoint loaded wrong (user-trial-2 item 4):
that cause needs evidence that trained weights were there (a config naming a resume or a pretrained model,
an LR too small to move weights, a log that starts far on); without it the early-training causes lead."""

from __future__ import annotations

import torch

from stethoscope.diagnose.engine import diagnose_records
from stethoscope.records import LOSS, StepRecord

torch.set_num_threads(1)
WRECKED = "the first optimizer update wrecked already-trained weights"
FRESH = "the first updates of a freshly initialised model"


def _fresh_mlp_run() -> list[StepRecord]:
    """The trial's Lightning MLP as a plain loop: fresh init, SGD 0.05, MSE on y = 2 x0 (loss 2.5 at step 1, 4.4 at 2)."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    x = torch.randn(512, 16)
    y = x[:, :1] * 2 + 0.1 * torch.randn(512, 1)
    order = torch.Generator().manual_seed(1)  # a batch order whose second batch jumps (as the trial's did)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16, shuffle=True,
                                         generator=order)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    out, step = [], 0
    for _ in range(3):
        for xb, yb in loader:
            loss = torch.nn.functional.mse_loss(net(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            out.append(StepRecord(step, {LOSS: float(loss.detach())}))  # host sync
    return out


def _early_jump(meta: dict) -> object:
    jumps = [f for f in diagnose_records(_fresh_mlp_run(), meta) if f.type in ("loss_spike", "divergence")
             and f.step is not None and f.step <= 3]
    assert jumps, "the fresh MLP's loss jumps at its first updates"
    return jumps[0]


def test_a_fresh_models_early_jump_names_the_early_training_causes_not_a_bad_checkpoint():
    f = _early_jump({"config": {}})
    assert not any(c.startswith(WRECKED) for c in f.causes), f.causes
    assert f.causes[0].startswith(FRESH) and "warm" in f.fixes[0], f.causes
    assert len(f.causes) == len(f.fixes)


def test_a_config_that_loaded_weights_is_the_evidence_for_the_checkpoint_cause():
    f = _early_jump({"config": {"resume_from_checkpoint": "out/checkpoint-500"}})
    assert f.causes[0].startswith(WRECKED), f.causes
    assert not any(c.startswith(FRESH) for c in f.causes)
