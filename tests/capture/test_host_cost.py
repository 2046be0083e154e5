"""What the training thread's host-cost cuts must keep (issue 28.2): the grad hooks' cached parameter list follows
frozen parameters and added param groups, the update ratio of a partial sample is still measured on it, and a
flush hands the writer one queue item a step (not one a point)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from stethoscope import Monitor  # noqa: E402
from stethoscope.capture.torch_hooks import GradStats  # noqa: E402
from stethoscope.store.query import open_run  # noqa: E402


def _train(model, opt, stats, steps: int, frozen=()) -> list[dict]:
    out = []
    for _ in range(steps):
        loss = model(torch.randn(4, 8)).pow(2).mean()
        loss.backward()
        for p in frozen:
            p.grad = None  # a parameter without a grad this step (frozen, or unused by this batch)
        first = model[0].weight.grad.norm().item()  # host sync: a test reads back
        want = torch.nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None])
        before = [p.detach().clone() for p in model.parameters()]
        opt.step()
        got = stats.take() or {}
        got["want_norm"] = want
        got["first_weight_norm"] = first
        got["before"] = before
        got["after"] = [p.detach().clone() for p in model.parameters()]
        out.append(got)
        opt.zero_grad(set_to_none=True)
    return out


def test_the_cached_parameter_list_follows_frozen_parameters_and_added_groups() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 1))
    first, second = model[0], model[1]
    opt = torch.optim.SGD(first.parameters(), lr=0.1)
    stats = GradStats(opt, {}, details_every=1)
    for got in _train(model, opt, stats, 2, frozen=[first.bias]):  # only the first layer's weight: in opt, a grad
        assert got["grad/norm"].item() == pytest.approx(got["first_weight_norm"], rel=1e-6)  # host sync: a test
    opt.add_param_group({"params": list(second.parameters())})
    seen = _train(model, opt, stats, 2)
    for got in seen:  # every parameter has a grad and is in the optimizer now: the global norm covers all four
        assert got["grad/norm"].item() == pytest.approx(got["want_norm"].item(), rel=1e-6)  # host sync: a test
    stats.remove()


def test_grad_norm_leaves_out_parameters_without_a_grad() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    stats = GradStats(opt, {}, details_every=1)
    for got in _train(model, opt, stats, 3, frozen=[model[0].bias]):
        assert got["grad/norm"].item() == pytest.approx(got["want_norm"].item(), rel=1e-6)  # host sync: a test
    for got in _train(model, opt, stats, 2):  # the bias has a grad again: back in the norm
        assert got["grad/norm"].item() == pytest.approx(got["want_norm"].item(), rel=1e-6)  # host sync: a test
    stats.remove()


@pytest.mark.parametrize("max_bytes", [1 << 20, 8 * 8 * 4], ids=["every parameter", "a partial sample"])
def test_update_ratio_is_the_update_norm_over_the_sampled_parameters_norm(max_bytes) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    stats = GradStats(opt, {}, details_every=1, update_max_bytes=max_bytes)
    for got in _train(model, opt, stats, 3):
        budget, before, after = max_bytes, [], []
        for b, a in zip(got["before"], got["after"]):
            if b.numel() * b.element_size() <= budget:
                budget -= b.numel() * b.element_size()
                before.append(b)
                after.append(a)
        upd = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(a - b) for a, b in zip(after, before)]))
        par = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(b) for b in before]))
        assert got["update/ratio"].item() == pytest.approx((upd / par).item(), rel=1e-5)  # host sync: a test
        total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(b) for b in got["before"]]))
        assert got["param/norm"].item() == pytest.approx(total.item(), rel=1e-6)  # host sync: a test reads back
    stats.remove()


def test_a_flush_puts_one_queue_item_a_step(tmp_path) -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    mon = Monitor(tmp_path / "run", model=model, optimizer=opt, log_every=10, flush_interval=1e6, serve=False,
                  gpu_health=False, detect=False)
    queue = mon._recorder.queue
    items = []
    put, put_batch = queue.put, queue.put_batch
    queue.put = lambda item: items.append(("point", item)) or put(item)
    queue.put_batch = lambda item, weight: (items.append(("step", item[0], weight, set(item[2])))
                                            or put_batch(item, weight))
    try:
        for step in range(10):
            loss = model(torch.randn(4, 8)).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            mon.step(step, loss=loss, acc=0.5)
    finally:
        mon.close()
    assert [i for i in items if i[0] == "point"] == []  # no point on its own
    steps = [i for i in items if i[0] == "step" and "train/loss" in i[3]]
    assert [i[1] for i in steps] == list(range(10))  # one item a step, in order
    assert all(weight == len(keys) >= 4 for _, _, weight, keys in steps)  # weighing its points (loss, acc, norm, lr…)
    with open_run(tmp_path / "run") as run:
        assert run.series("acc")[0] == list(range(10))
        assert run.series("grad/norm")[0] == list(range(10))


def test_host_stats_read_directly_agree_with_psutil() -> None:
    import time

    import psutil

    from stethoscope.capture.system import HostStats
    from stethoscope.records import CPU_PCT, RSS

    proc = psutil.Process()
    ours = HostStats()
    proc.cpu_percent(None)
    end = time.process_time() + 0.3
    while time.process_time() < end:  # busy: this thread's CPU, so both see ~100% of one core (less if preempted)
        pass
    got, theirs = ours.sample(), proc.cpu_percent(None)
    assert got[RSS] == pytest.approx(proc.memory_info().rss / (1 << 30), rel=0.02)  # the same statm field
    assert 30.0 <= got[CPU_PCT] <= 210.0 and abs(got[CPU_PCT] - theirs) <= 15.0  # psutil counts 10 ms ticks


def test_detach_keeps_a_tensor_outside_autograd_and_cuts_a_graph() -> None:
    from stethoscope.capture.tensors import detach

    norm = torch.nn.utils.get_total_norm([torch.ones(3)])  # no graph: what clip_grad_norm_ returns
    assert detach(norm) is norm
    w = torch.ones(2, requires_grad=True)
    loss = (w * 2).sum()
    kept = detach(loss)
    assert kept is not loss and kept.grad_fn is None and not kept.requires_grad and kept.item() == 4.0  # host sync
    assert detach(3) == 3 and detach(2.5) == 2.5
