"""numerics(): non-finite/extreme parameters, saturated activations, norm eps too small for the dtype."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from stethoscope.debug import NumericsConfig, numerics  # noqa: E402


class RMSNorm(torch.nn.Module):
    """A hand-written RMSNorm computing in its input's dtype (as many model files do)."""

    def __init__(self, d: int, eps: float) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))
        self.variance_epsilon = eps

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)


def _model(eps=1e-12, norm="layer"):
    torch.manual_seed(0)
    n = torch.nn.LayerNorm(16, eps=eps) if norm == "layer" else RMSNorm(16, eps)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), n, torch.nn.Linear(16, 4))


def _x(dtype=torch.float32):
    return torch.randn(32, 8, generator=torch.Generator().manual_seed(0)).to(dtype)


def test_a_healthy_float32_model_has_no_issue():
    rep = numerics(_model(eps=1e-5), _x())
    assert rep.issues == [] and rep.norms_checked == ["1"] and rep.modules_called == 4
    assert "every norm eps safe" in str(rep)


def test_tiny_layernorm_eps_is_flagged_for_float16_only_as_a_risk_when_torch_computes_it_in_float32():
    rep = numerics(_model(eps=1e-12).half(), _x(torch.float16))
    [issue] = rep.of("norm")
    assert issue.name == "1" and issue.kind == "eps_too_small" and issue.severity == "warning"
    assert issue.dtype == "float16" and "rounds to 0 in float16" in issue.message and "copes" in issue.message
    assert numerics(_model(eps=1e-5).half(), _x(torch.float16)).of("norm") == []


def test_a_hand_written_norm_with_tiny_eps_gives_nan_in_float16_and_is_critical():
    rep = numerics(_model(eps=1e-12, norm="rms").half(), _x(torch.float16))
    [issue] = rep.of("norm")
    assert issue.kind == "eps_nan" and issue.severity == "critical" and issue.values["type"] == "RMSNorm"
    assert "eps >= 1e-6" in issue.message


def test_bfloat16_has_float32_range_so_only_an_eps_that_underflows_is_flagged():
    assert numerics(_model(eps=1e-12, norm="rms").bfloat16(), _x(torch.bfloat16)).of("norm") == []
    for norm in ("layer", "rms"):
        rep = numerics(_model(eps=0.0, norm=norm).bfloat16(), _x(torch.bfloat16))
        [issue] = rep.of("norm")
        assert issue.kind == "eps_nan" and issue.dtype == "bfloat16" and "rounds to 0 in bfloat16" in issue.message


def test_the_dtype_argument_judges_eps_for_the_dtype_you_will_train_in():
    rep = numerics(_model(eps=1e-12, norm="rms"), _x(), dtype=torch.float16)
    [issue] = rep.of("norm")
    assert issue.kind == "eps_too_small" and "float16" in issue.message  # the float32 probe stays finite


def test_saturated_activations_are_flagged():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4), torch.nn.ReLU())
    with torch.no_grad():
        model[2].bias.fill_(-50.0)  # every unit of the last ReLU is off: a constant 0 output
    rep = numerics(model, _x())
    [issue] = rep.of("activation")
    assert issue.name == "3" and issue.kind == "saturated" and issue.values["std"] == 0.0
    assert "constant output" in issue.message  # the Sequential returning the same tensor is not reported again


def test_non_finite_and_extreme_parameters_and_activations():
    model = _model(eps=1e-5)
    with torch.no_grad():
        model[0].weight[0, 0] = float("nan")
        model[2].weight.mul_(1e4)
    rep = numerics(model, _x())
    assert [(i.name, i.kind) for i in rep.of("parameter")] == [("0.weight", "nonfinite"), ("2.weight", "extreme")]
    assert rep.of("activation", "nonfinite")[0].name == "0"  # the first module whose output is NaN
    assert rep.of("parameter")[1].values["absmax"] > 1e3


def test_near_overflow_in_float16():
    model = _model(eps=1e-5).half()
    with torch.no_grad():
        model[2].weight.fill_(0.0)
        model[2].bias.fill_(2e4)  # a third of float16's 65504
    rep = numerics(model, _x(torch.float16), NumericsConfig(param_absmax=1e5))
    assert [(i.name, i.kind) for i in rep.of("activation")] == [("2", "near_overflow")]
    assert [(i.name, i.kind) for i in rep.of("parameter")] == [("2.bias", "near_overflow")]
    assert numerics(model.float(), _x()).of("activation", "near_overflow") == []  # float32 has room


def test_under_autocast_and_serialised():
    model = _model(eps=1e-12, norm="rms")
    rep = numerics(model, _x(), autocast=torch.bfloat16)
    assert rep.of("norm") == []
    d = json.loads(json.dumps(numerics(_model(eps=1e-12, norm="rms").half(), _x(torch.float16)).to_dict()))
    assert d["issues"][0]["kind"] == "eps_nan"
    with pytest.raises(ValueError, match="saturated_std"):
        NumericsConfig(saturated_std=0)


def test_a_training_mode_forward_leaves_batchnorm_and_the_rng_as_they_were():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.Dropout(0.5))
    stats = model[1].running_mean.clone()
    torch.manual_seed(3)
    numerics(model, _x())
    after = torch.rand(2)
    torch.manual_seed(3)
    assert torch.equal(model[1].running_mean, stats) and torch.equal(after, torch.rand(2))
    assert model[1].num_batches_tracked.item() == 0
