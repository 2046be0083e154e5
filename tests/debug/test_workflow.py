"""workflow(): every step runs a real check on the model, optimizer and batch, and says what it found."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from stethoscope import Finding, Monitor  # noqa: E402
from stethoscope.debug import WorkflowContext, workflow  # noqa: E402
from tests.debug.models import LM, batch, mse, net  # noqa: E402

BAD_STEP, BAD_EXAMPLE, JUMP_STEP = 30, 3, 10


def _batch(i):
    x, y = batch(i)
    if i == BAD_STEP:
        x = x.clone()
        x[BAD_EXAMPLE] *= 200.0  # one corrupted sample: its features 200x too large
    return x, y


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A real tiny run: AdamW, the LR raised x10 at step 10 (a resume that lost the schedule), a bad batch at 30."""
    path = tmp_path_factory.mktemp("wf") / "run"
    model = net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    with Monitor(path, model=model, optimizer=opt, strict=True) as mon:
        for i in range(40):
            if i == JUMP_STEP:
                opt.param_groups[0]["lr"] = 1e-3
            x, y = _batch(i)
            loss = mse(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            mon.step(i, loss=loss, batch_ids=[f"doc-{i * 16 + k}" for k in range(16)])
    return path, model, opt


def test_a_spike_from_a_bad_batch_names_the_batch_and_the_example(run):
    path, model, opt = run
    finding = Finding("loss_spike", "warning", BAD_STEP, "loss spiked")
    w = workflow(finding, WorkflowContext(model=model, optimizer=opt, batch=_batch(BAD_STEP), loss_fn=mse, run=path,
                                          reference_batches=[_batch(41), _batch(42)]))
    assert [s.title for s in w.steps] == ["check the batch", "check the gradients", "check the LR schedule",
                                          "check the numerics"]
    first = w.steps[0]
    assert first.status == "problem" and w.cause is first
    assert f"example {BAD_EXAMPLE} (sample doc-{BAD_STEP * 16 + BAD_EXAMPLE})" in first.found
    assert f"the batch of step {BAD_STEP} (samples doc-480" in first.found
    assert "its inputs' scale (RMS)" in first.found and "x2" in first.found  # ~x200 the median example
    assert f"inspect example {BAD_EXAMPLE}" in first.next
    assert all(s.found and s.next and s.status in ("problem", "note", "ok") for s in w.steps)  # all four ran
    assert w.steps[1].data["gradients"]["layers"] and "total gradient norm" in w.steps[1].found
    text = str(w)
    assert text.startswith(f"loss spike workflow at step {BAD_STEP}") and "=> check the batch" in text
    json.dumps(w.to_dict())


def test_an_ordinary_batch_is_not_blamed(run):
    path, model, opt = run
    w = workflow({"type": "loss_spike", "step": 25}, dict(model=model, batch=_batch(25), loss_fn=mse,
                                                         reference_batches=[_batch(41), _batch(42)]))
    assert w.steps[0].status == "ok" and "looks ordinary" in w.steps[0].next


def test_the_lr_step_reads_the_runs_schedule_and_the_optimizer(run):
    path, model, opt = run
    w = workflow({"type": "divergence", "step": JUMP_STEP + 2, "severity": "error"},
                 dict(model=model, optimizer=opt, batch=_batch(JUMP_STEP + 2), loss_fn=mse, run=path))
    lr = w.steps[2]
    assert lr.status == "problem"
    assert f"LR jumped 0.0001 -> 0.001 (x10) at step {JUMP_STEP}, 2 steps before" in lr.found
    assert lr.data["lr_at_step"] == pytest.approx(1e-3) and "update/weight ratio" in lr.found


def test_an_lr_too_high_for_adam_and_a_scheduler_that_drives_another_optimizer():
    model = net()
    opt = torch.optim.Adam(model.parameters(), lr=0.5)
    other = torch.optim.Adam(net(1).parameters(), lr=0.5)
    sched = torch.optim.lr_scheduler.StepLR(other, step_size=1, gamma=0.1)
    other.step()
    sched.step()
    w = workflow("divergence", dict(model=model, optimizer=opt, scheduler=sched, batch=batch(0), loss_fn=mse))
    found = w.steps[2].found
    assert w.steps[2].status == "problem"
    assert "optimizer LR 0.5 is above 0.01, high for an Adam-family optimizer" in found
    assert "the scheduler says LR 0.05 but the optimizer uses 0.5" in found


def test_the_nan_workflow_on_a_nan_batch():
    model = net()
    x, y = batch(0)
    x[7] = float("nan")
    w = workflow(Finding("nan", "critical", 123, "non-finite train/loss at step 123"),
                 dict(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), batch=(x, y), loss_fn=mse))
    first, grads = w.steps[0], w.steps[1]
    assert first.status == "problem" and "the batch of step 123: the batch already held NaN/Inf (batch[0])" in first.found
    assert first.data["locate"]["inputs_nonfinite"] == ["batch[0]"]
    assert grads.status == "problem" and "nonfinite" in grads.found
    assert w.steps[3].data["numerics"]["issues"][0]["kind"] == "nonfinite"  # the activations of that batch
    assert w.cause is first


def test_the_nan_workflow_on_a_model_fault_points_at_the_module():
    model = net()
    model.blocks[0].act.armed = True
    w = workflow("nan", dict(model=model, batch=batch(0), loss_fn=mse))
    assert "module 'blocks.0.act' (Overflow) made" in w.steps[0].found
    assert w.steps[0].status == "problem" and w.steps[0].stage == "forward"
    assert w.steps[2].status == "skipped" and "optimizer=" in w.steps[2].found
    assert w.steps[1].status == "problem" and w.steps[1].stage == "backward"
    assert w.cause is w.steps[0]  # the forward made the Inf; the backward only carries it


def test_a_nan_weight_is_the_cause_and_the_gradients_it_poisons_are_evidence():
    """Issue 31.1: a NaN planted in the last layer's weight makes every layer's gradient NaN; the first layer,
    listed first, was blamed. A weight non-finite before the pass is upstream of any gradient."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    with torch.no_grad():
        model[2].weight[0, 3] = float("nan")
    x, y = torch.randn(32, 8), torch.randint(0, 4, (32,))
    w = workflow({"type": "nan", "step": 199}, dict(model=model, batch=(x, y), loss_fn=torch.nn.functional.cross_entropy,
                                                   optimizer=torch.optim.SGD(model.parameters(), lr=0.1)))
    grads = w.steps[1]
    assert grads.status == "problem" and "nonfinite: 0, 2" in grads.found
    assert "nearest the loss is '2'" in grads.next
    assert w.cause is w.steps[0] and w.cause.stage == "parameters"
    assert "parameters were already NaN/Inf before this pass (2.weight)" in w.conclusion
    assert "the first non-finite layer is '0'" not in str(w)
    assert w.conclusion.endswith("evidence, not causes: check the gradients (the backward)")
    w.steps.reverse()  # the order the checks ran in does not decide: the chain does
    assert w.cause.stage == "parameters" and w.cause.title in ("check the batch", "check the numerics")


def test_missing_inputs_are_named_and_unknown_findings_refused():
    w = workflow("loss_spike", {"model": net()})
    assert [s.status for s in w.steps] == ["skipped"] * 4
    assert "batch=" in w.steps[0].found and "optimizer=" in w.steps[2].found
    assert "no step found the trigger" in w.conclusion
    with pytest.raises(ValueError, match="no workflow for a 'plateau' finding"):
        workflow("plateau", {"model": net()})
    with pytest.raises(ValueError, match="unknown key.s. batchh; expected model and any of batch, optimizer"):
        workflow("nan", {"model": net(), "batchh": 1})
    with pytest.raises(ValueError, match="needs its 'type'"):
        workflow({"step": 3}, {"model": net()})


def test_the_nan_workflow_on_a_batch_whose_labels_are_all_masked():
    torch.manual_seed(0)
    model = LM()
    ids = torch.randint(0, 10, (4, 6))
    w = workflow(Finding("nan", "critical", 50, "non-finite train/loss at step 50"),
                 dict(model=model, batch={"input_ids": ids, "labels": torch.full((4, 6), -100)}))
    assert w.cause is w.steps[0] and "every label in the batch is masked (-100)" in w.steps[0].found
    assert "collator" in w.steps[0].next
    labels = ids.clone()
    labels[1] = -100  # one example without label tokens: common in SFT, not a NaN
    w = workflow("nan", dict(model=model, batch={"input_ids": ids, "labels": labels}))
    assert w.steps[0].status == "ok" and "1 of 4 examples have every label masked" in w.steps[0].found


def test_a_batch_bad_throughout_is_named_as_a_whole_not_by_one_example(run):
    """Issue 31.2: every input x50 singled out one example ("x57.7 the median example's"), as if one sample
    were corrupted; the batch as a whole is the outlier. One example far above even that batch is still named."""
    path, model, opt = run
    x, y = batch(BAD_STEP)
    ctx = dict(model=model, batch=(x * 50, y), loss_fn=mse, reference_batches=[_batch(41), _batch(42)])
    first = workflow({"type": "loss_spike", "step": BAD_STEP}, ctx).steps[0]
    assert first.status == "problem" and first.stage == "inputs"
    assert "the batch as a whole: 16 of 16 examples' inputs' scale (RMS) is at least x5" in first.found
    assert "inspect example" not in first.next and "example 0" not in first.found
    assert f"inspect the batch of step {BAD_STEP} as a whole" in first.next
    x2 = x * 50
    x2[BAD_EXAMPLE] *= 100.0  # and one sample corrupted on top of it
    first = workflow({"type": "loss_spike", "step": BAD_STEP}, {**ctx, "batch": (x2, y)}).steps[0]
    assert "the batch as a whole" in first.found and f"inspect example {BAD_EXAMPLE}" in first.next
    first = workflow({"type": "loss_spike", "step": BAD_STEP}, {**ctx, "batch": (x, y * 50)}).steps[0]  # bad targets
    assert "examples' losses are above the other batches' 90th percentile" in first.found
    assert "the batch as a whole, not one example" in first.found and "inspect example" not in first.next
