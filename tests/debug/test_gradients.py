"""gradients(): per-layer norms and flags from one fused computation."""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")

from stethoscope.debug import GradientConfig, gradients  # noqa: E402


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 16), torch.nn.Linear(16, 1))


def _backward(model):
    g = torch.Generator().manual_seed(0)
    model(torch.randn(64, 8, generator=g)).pow(2).mean().backward()


def test_norms_match_torch_per_layer_and_in_total():
    model = _model()
    _backward(model)
    rep = gradients(model)
    assert [ly.name for ly in rep.layers] == ["0", "2", "4", "5"]
    for ly in rep.layers:
        mod = model[int(ly.name)]
        expected = torch.linalg.vector_norm(torch.cat([mod.weight.grad.flatten(), mod.bias.grad.flatten()])).item()
        assert ly.norm == pytest.approx(expected, rel=1e-5)
        assert ly.params == [f"{ly.name}.weight", f"{ly.name}.bias"]
    total = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()]).item()
    assert rep.total_norm == pytest.approx(total, rel=1e-5)
    assert not rep.flagged() and "within the thresholds" in str(rep)


def test_zeroed_and_exploding_layers_are_flagged():
    model = _model()
    _backward(model)
    for p in model[4].parameters():
        p.grad.mul_(1e6)
    for p in model[5].parameters():
        p.grad.zero_()
    rep = gradients(model)
    assert rep.layer("4").flags == ["exploding"]
    assert rep.layer("5").flags == ["zero"]
    assert [ly.name for ly in rep.flagged()] == ["4", "5"]
    text = str(rep)
    assert "exploding" in text and "4 (Linear)" in text


def test_a_huge_finite_gradient_is_exploding_not_nonfinite():
    model = _model()
    _backward(model)
    model[4].weight.grad.fill_(1e30)
    ly = gradients(model).layer("4")
    assert ly.flags == ["exploding"] and ly.norm == pytest.approx(1e30 * (16 * 32) ** 0.5, rel=1e-6)


def test_vanishing_and_nonfinite_layers():
    model = _model()
    _backward(model)
    for p in model[0].parameters():
        p.grad.mul_(1e-9)
    model[2].weight.grad[0, 0] = float("inf")
    rep = gradients(model)
    assert rep.layer("0").flags == ["vanishing"]
    assert rep.layer("2").flags == ["nonfinite"] and math.isinf(rep.layer("2").norm)


def test_dead_units_are_the_weight_rows_without_gradient():
    model = _model()
    with torch.no_grad():
        model[2].bias[:10] = -1e3  # ten units whose ReLU is off for every example
    _backward(model)
    rep = gradients(model)
    ly = rep.layer("2")
    assert ly.units == 32 and set(range(10)) <= set(ly.dead_units) and "dead_units" in ly.flags
    assert "dead_units" not in rep.layer("4").flags
    assert gradients(model, GradientConfig(dead_frac=0.9)).layer("2").flags == []


def test_dead_units_of_a_conv_layer():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(2, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 4 * 4, 1))
    with torch.no_grad():
        model[0].bias[[1, 5]] = -1e3
    model(torch.randn(4, 2, 6, 6)).sum().backward()
    ly = gradients(model).layer("0")
    assert ly.units == 8 and ly.dead_units == [1, 5]


def test_params_without_gradient_are_listed():
    model = _model()
    _backward(model)
    model[5].bias.grad = None
    rep = gradients(model)
    assert rep.no_grad == ["5.bias"] and rep.layer("5").params == ["5.weight"]
    assert gradients(torch.nn.Linear(2, 2)).layers == []


def test_one_fused_norm_call_and_no_item_per_parameter(monkeypatch):
    model = _model()
    _backward(model)
    calls = []
    real = torch._foreach_norm
    monkeypatch.setattr(torch, "_foreach_norm", lambda ts, *a, **k: calls.append(len(ts)) or real(ts, *a, **k))

    def no_item(self):
        raise AssertionError("gradients() called .item()")

    monkeypatch.setattr(torch.Tensor, "item", no_item)
    rep = gradients(model)
    assert calls == [8]  # every gradient in one call
    assert len(rep.layers) == 4


def test_config_is_validated_and_the_report_serialises():
    with pytest.raises(ValueError, match="dead_frac"):
        GradientConfig(dead_frac=0)
    with pytest.raises(ValueError, match="exploding_ratio"):
        GradientConfig(exploding_ratio=-1)
    model = _model()
    _backward(model)
    model[0].weight.grad[0, 0] = float("nan")
    d = json.loads(json.dumps(gradients(model).to_dict()))
    assert d["layers"][0]["norm"] == "nan" and d["layers"][0]["flags"] == ["nonfinite"]


def test_each_tool_reads_the_host_once_whatever_the_model_size():
    from stethoscope.debug import locate_nonfinite, numerics
    from stethoscope.testing import count_host_reads
    from tests.debug.models import Net, batch, mse

    for n_blocks in (1, 6):
        torch.manual_seed(0)
        model = Net(n=n_blocks)
        model.blocks[-1].act.armed = True
        with count_host_reads() as located:
            rep = locate_nonfinite(model, batch(0), mse)
        assert rep.first_output.name == f"blocks.{n_blocks - 1}.act"
        with count_host_reads() as checked:
            numerics(model, batch(0)[0])
        mse(model(batch(0)[0]), batch(0)[1]).backward()
        with count_host_reads() as normed:
            gradients(model)
        assert (located.count, checked.count, normed.count) == (1, 1, 1), (located, checked, normed)
