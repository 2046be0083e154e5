"""ModuleTrace: per-module forward and backward timings of the sampled steps, on a real model trained on CPU."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from stethoscope.probe.trace import ModuleTrace  # noqa: E402
from tests.debug.models import LM  # noqa: E402


def _train(model, trace, steps, batch, loss_of):
    rows = {}
    for step in range(steps):
        loss_of(model, batch(step)).backward()
        model.zero_grad()
        rows[step] = trace.on_step(step)
    return rows


def _backward(rows):
    return {module: d for _, module, stage, d, _ in rows if stage == "backward"}


def test_every_module_has_a_backward_time_and_the_root_spans_its_children():
    """Issue 31.6: the first layer and the root get no gradient on their inputs, so they had no backward row
    and the trace did not add up to the step; their backward ends with their parameters' gradients."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    trace = ModuleTrace(model, every=3)

    def batch(i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(32, 8, generator=g), torch.randint(0, 4, (32,), generator=g)

    rows = _train(model, trace, 7, batch, lambda m, b: torch.nn.functional.cross_entropy(m(b[0]), b[1]))
    assert {s for s, r in rows.items() if r} == {3, 6}  # sampled: armed after step 2 and 5
    bwd = _backward(rows[3])
    assert set(bwd) == {"0", "1", "2", "Sequential"}
    assert bwd["Sequential"] >= max(bwd["0"], bwd["1"], bwd["2"])  # it starts before and ends after each of them
    assert all(not p._backward_hooks for p in model.parameters())  # the parameter hooks went with the step
    assert {r[2] for r in rows[6]} == {"forward", "backward"} and len(_backward(rows[6])) == 4


def test_an_embedding_and_a_model_returning_a_dict_get_backward_times():
    torch.manual_seed(0)
    model = LM()
    trace = ModuleTrace(model, every=1)
    ids = torch.randint(0, 10, (4, 6))
    rows = _train(model, trace, 2, lambda i: ids, lambda m, b: m(input_ids=b, labels=b)["loss"])
    bwd = _backward(rows[1])
    assert set(bwd) == {"emb", "out", "LM"} and bwd["LM"] >= bwd["emb"]
    frozen = LM()
    frozen.emb.weight.requires_grad_(False)  # nothing inside the embedding to wait for: no row, no hook left
    trace = ModuleTrace(frozen, every=1)
    rows = _train(frozen, trace, 2, lambda i: ids, lambda m, b: m(input_ids=b, labels=b)["loss"])
    assert set(_backward(rows[1])) == {"out", "LM"}


def test_an_input_passed_by_keyword_is_timed_from_its_gradient():
    class Inner(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, *, hidden):
            return self.fc(hidden)

    class Outer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inp, self.inner = torch.nn.Linear(4, 4), Inner()

        def forward(self, x):
            return self.inner(hidden=self.inp(x))  # as Hugging Face blocks are called

    model = Outer()
    trace = ModuleTrace(model, every=1)
    rows = _train(model, trace, 2, lambda i: torch.randn(3, 4), lambda m, b: m(b).sum())
    assert set(_backward(rows[1])) == {"inp", "inner", "inner.fc", "Outer"}
    trace.on_step(2)
    model(torch.randn(3, 4)).sum().backward()
    assert trace._no_grad_in == ["Outer", "inp"]  # inner's keyword input needs a gradient: timed by it, no hooks
    assert len(trace._handles) == 2 * 4 + 2  # module hooks, and inp's weight and bias
