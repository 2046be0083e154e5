"""locate_nonfinite on tiny real models: the module, the gradient, the inputs, the hooks."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from stethoscope.debug import NonfiniteReport, locate_nonfinite  # noqa: E402
from tests.debug.models import LM, Overflow, batch, hooks_left, mse, net  # noqa: E402


def test_inf_is_located_at_the_module_that_made_it_in_execution_order():
    model = net()
    model.blocks[1].act.armed = True  # same class as blocks.0.act, which stays finite and runs first
    rep = locate_nonfinite(model, batch(0), mse)
    hit = rep.first_output
    assert hit is not None and hit.name == "blocks.1.act" and hit.type == "Overflow"
    assert hit.inputs_finite and hit.inf > 0 and hit.inf + hit.nan == 256 and hit.dtype == "float32" and hit.shape == [16, 16]
    assert not rep.inputs_nonfinite and not rep.params_nonfinite
    assert rep.first_grad is not None and rep.first_grad.name.startswith("head.")  # nearest the loss first
    assert "blocks.1.act" in rep.verdict and "from finite inputs" in rep.verdict
    assert hooks_left(model) == 0


def test_nan_in_the_inputs_is_reported_as_the_inputs():
    x, y = batch(1)
    x[2, 3] = float("nan")
    rep = locate_nonfinite(net(), (x, y), mse)
    assert rep.inputs_nonfinite == ["batch[0]"]
    assert rep.first_output.name == "inp" and not rep.first_output.inputs_finite
    assert rep.verdict.startswith("the batch already held NaN/Inf (batch[0])")
    assert "check-data" in rep.next_check


def test_a_gradient_that_only_the_backward_makes_is_located():
    class Gate(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = torch.nn.Parameter(torch.zeros(()))  # sqrt(0) is finite, its derivative is not

        def forward(self, x):
            return x * (1 + torch.sqrt(self.scale))

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.Sequential(Gate()), torch.nn.Linear(4, 1))
    rep = locate_nonfinite(model, batch(2), mse)
    assert rep.first_output is None and rep.loss is not None and rep.loss == rep.loss  # forward finite
    assert rep.first_grad.name == "1.0.scale" and rep.grads_nonfinite == 1 and rep.grads_total == 5
    assert "the backward made the first NaN/Inf gradient, in '1.0.scale'" in rep.verdict


def test_a_huge_but_finite_parameter_is_not_called_non_finite():
    model = net()
    with torch.no_grad():
        model.head.weight.fill_(1e30)  # its float32 sum of squares would overflow
    rep = locate_nonfinite(model, batch(3), mse)
    assert rep.params_nonfinite == []


def test_a_parameter_that_is_already_nan_is_named():
    model = net()
    with torch.no_grad():
        model.blocks[0].fc.weight[0, 0] = float("nan")
    rep = locate_nonfinite(model, batch(3), mse)
    assert rep.params_nonfinite == ["blocks.0.fc.weight"]
    assert rep.first_output.name == "blocks.0.fc"
    assert rep.first_grad is not None
    assert "an earlier update broke them" in rep.verdict


def test_hooks_grads_buffers_and_rng_are_restored_even_when_the_forward_raises():
    class Boom(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError("shape mismatch in the user's model")

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8), torch.nn.Dropout(0.5), Boom())
    model[0].weight.grad = g = torch.ones(8, 8)
    stats = model[1].running_mean.clone()
    torch.manual_seed(7)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        locate_nonfinite(model, batch(0), mse)
    assert hooks_left(model) == 0
    assert model[0].weight.grad is g and model[0].bias.grad is None
    assert torch.equal(model[1].running_mean, stats)  # the BatchNorm forward ran, its statistics are put back
    after = torch.rand(3)
    torch.manual_seed(7)
    assert torch.equal(after, torch.rand(3))  # dropout's draws did not move the generator


def test_called_under_no_grad_it_still_runs_the_backward():
    model = net()
    model.blocks[0].act.armed = True
    with torch.no_grad():
        rep = locate_nonfinite(model, batch(0), mse)
    assert rep.backward and rep.first_grad is not None and rep.first_output.name == "blocks.0.act"


def test_the_training_gradients_survive_a_successful_pass_too():
    model = net()
    mse(model(batch(0)[0]), batch(0)[1]).backward()
    before = {n: p.grad.clone() for n, p in model.named_parameters()}
    locate_nonfinite(model, batch(5), mse)
    assert all(torch.equal(before[n], p.grad) for n, p in model.named_parameters())


def test_under_bfloat16_autocast_on_cpu():
    model = net()
    model.blocks[0].act.armed = True
    with torch.autocast("cpu", dtype=torch.bfloat16):
        rep = locate_nonfinite(model, batch(0), mse)
    assert rep.first_output.name == "blocks.0.act" and rep.first_output.dtype == "bfloat16"
    assert hooks_left(model) == 0


def test_float16_autocast_argument_and_the_overflow_advice():
    model = net()
    with torch.no_grad():
        model.blocks[1].fc.weight.mul_(5e4)  # a real float16 overflow: no fault module
    rep = locate_nonfinite(model, batch(0), mse, autocast=torch.float16)
    assert rep.autocast == "float16"
    assert rep.first_output.name == "blocks.1.fc" and rep.first_output.dtype == "float16"
    assert rep.first_output.inf > 0 and "overflows float16" in rep.next_check
    assert locate_nonfinite(model, batch(0), mse).first_output is None  # in float32 the same batch is finite


def test_mapping_batch_and_the_models_own_loss():
    torch.manual_seed(0)
    ids = torch.randint(0, 10, (2, 5))
    rep = locate_nonfinite(LM(), {"input_ids": ids, "labels": torch.full((2, 5), -100)})
    assert rep.first_output.name == "LM" and rep.first_output.shape == []  # the loss, computed in the model
    assert rep.loss_nonfinite and rep.masked_examples == rep.examples == 2
    assert "every label in the batch is masked (-100)" in rep.verdict and "collator" in rep.next_check
    half = torch.full((2, 5), -100)
    half[1, :2] = 3
    rep = locate_nonfinite(LM(), {"input_ids": ids, "labels": half})
    assert not rep.found and rep.masked_examples == 1


def test_report_reads_and_serialises():
    model = net()
    model.blocks[1].act.armed = True
    rep = locate_nonfinite(model, batch(0), mse)
    text = str(rep)
    assert "first NaN/Inf output: 'blocks.1.act' (Overflow" in text and "next" in text
    d = json.loads(json.dumps(rep.to_dict()))
    assert d["first_output"]["name"] == "blocks.1.act" and d["loss"] == "nan" and d["found"] is True
    assert isinstance(rep, NonfiniteReport)
    clean = locate_nonfinite(net(), batch(0), mse)
    assert not clean.found and "did not reproduce" in clean.verdict


def test_a_nanogpt_style_model_called_with_inputs_and_targets():
    from stethoscope.demo.gpt import GPTConfig, TinyGPT

    torch.manual_seed(0)
    model = TinyGPT(GPTConfig(n_layer=2, n_embd=32, n_head=2, block_size=16))
    idx = torch.randint(0, 128, (2, 16))
    clean = locate_nonfinite(model, (idx, idx))  # no loss_fn: model(idx, targets) -> (logits, loss)
    assert not clean.found and clean.loss == pytest.approx(model(idx, idx)[1].item(), rel=1e-5)
    model.blocks[1].mlp[1] = Overflow()  # the second block's activation overflows
    model.blocks[1].mlp[1].armed = True
    rep = locate_nonfinite(model, (idx, idx))
    assert rep.first_output.name == "blocks.1.mlp.1" and rep.first_output.inputs_finite
    assert rep.first_grad is not None and hooks_left(model) == 0
