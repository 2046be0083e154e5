"""How many torch ops the Monitor adds to a training step, counted with torch.profiler (deterministic).

Counted: the aten ops stethoscope dispatches itself (top-level: no aten op above them). A fused
`torch._foreach_*` op over every parameter is one op here, as it is one multi-tensor kernel chain on a GPU;
on the CPU aten runs it as a loop of per-tensor ops nested under it, which are not counted.
The shape is GPT-2 small's (12 layers, 148 parameter tensors, AdamW, clip_grad_norm_) with tiny widths:
the number of ops depends on the number of tensors, not on their size.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
profiler = pytest.importorskip("torch.profiler")

from stethoscope import Monitor  # noqa: E402
from stethoscope.demo.gpt import GPTConfig, TinyGPT  # noqa: E402
from stethoscope.testing import top_level_ops  # noqa: E402

STEPS = 10  # one details_every cycle


def _ops_per_step(tmp_path, monitor: bool, pass_norm: bool = False, **options) -> float:
    torch.manual_seed(0)
    model = TinyGPT(GPTConfig(n_layer=12, n_embd=32, n_head=4, block_size=16, vocab_size=64))
    assert sum(1 for _ in model.parameters()) >= 148  # GPT-2 small has 148 parameter tensors
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    mon = Monitor(tmp_path, model=model, optimizer=opt, tokens_per_step=64, serve=False, detect=False,
                  **options) if monitor else None
    g = torch.Generator().manual_seed(0)

    def step(i: int) -> None:
        x = torch.randint(0, 64, (4, 16), generator=g)
        _, loss = model(x, x)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if mon is not None:
            mon.step(i, loss=loss, grad_norm=norm if pass_norm else None)

    for i in range(2):
        step(i)
    with profiler.profile(activities=[profiler.ProfilerActivity.CPU]) as prof:
        for i in range(2, 2 + STEPS):
            step(i)
    if mon is not None:
        mon.close()
    return top_level_ops(prof) / STEPS


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> float:
    return _ops_per_step(tmp_path_factory.mktemp("plain"), monitor=False)


@pytest.mark.parametrize("options", [{}, {"pass_norm": True}, {"grad_norms": "layers", "layers_every": 1}],
                         ids=["defaults", "grad_norm passed", "layer norms every step"])
def test_the_monitor_adds_at_most_40_ops_a_step(tmp_path, plain, options):
    added = _ops_per_step(tmp_path, monitor=True, **options) - plain
    assert 0 < added <= 40, f"{added:.1f} ops per step added by the Monitor"
