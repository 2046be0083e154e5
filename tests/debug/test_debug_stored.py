"""`stethoscope debug RUN` runs the checks a run's store allows (issue 31.3), on real recorded runs."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli

torch = pytest.importorskip("torch")

POISON, STEPS = 20, 30


def _train(path, steps, lr_at, poison_at=None):
    from stethoscope import Monitor
    from tests.debug.models import batch, mse, net

    torch.manual_seed(0)
    model = net()
    opt = torch.optim.SGD(model.parameters(), lr=lr_at(0))
    with Monitor(path, model=model, optimizer=opt, strict=True, log_every=5) as mon:
        for i in range(steps):
            opt.param_groups[0]["lr"] = lr_at(i)
            if i == poison_at:  # as the demo's nan@N: a weight written NaN outside the optimizer
                with torch.no_grad():
                    model.head.weight[0, 0] = float("nan")
            x, y = batch(i)
            loss = mse(model(x), y)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
            opt.step()
            opt.zero_grad()
            mon.step(i, loss=loss, grad_norm=norm, batch_ids=[f"s{i}-{k}" for k in range(16)])


@pytest.fixture(scope="module")
def poisoned(tmp_path_factory):
    path = tmp_path_factory.mktemp("stored") / "poisoned"
    _train(path, STEPS, lambda i: 0.01, POISON)
    return path


def test_debug_runs_the_checks_the_store_allows_on_a_nan_run(poisoned, cli_env):
    res = run_cli("debug", str(poisoned), env=cli_env)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert f"1. check the batch [note]: the batch of step {POISON} (samples s{POISON}-0" in out
    assert f"the forward of step {POISON} was already non-finite, before any gradient of that step" in out
    assert f"the update before it was finite and ordinary (grad norm" in out and f"at step {POISON - 1}, LR 0.01)" in out
    assert f"non-finite in all {STEPS - POISON - 1} records after it: the weights hold NaN/Inf now" in out
    assert "2. check the gradients [ok]" in out and "no lead-up in the grad norm" in out
    assert f"3. check the LR schedule [note]: LR 0.01 at step {POISON}" in out
    assert "4. check the numerics [skipped]: not run: needs the live model" in out
    assert "with the live model: per-layer gradient norms" in out
    assert f"workflow({{'type': 'nan', 'step': {POISON}}}" in out
    d = json.loads(run_cli("debug", str(poisoned), "--json", env=cli_env).stdout)
    f = next(f for f in d["findings"] if f["type"] == "nan")
    assert [c["status"] for c in f["checks"]] == ["note", "ok", "note", "skipped"]
    assert f["checks"][0]["data"]["first_nonfinite"] == {"train/loss": POISON, "grad/norm": POISON}


def test_a_growing_grad_norm_before_the_nan_is_the_cause(tmp_path, cli_env):
    """An LR that keeps rising past the stable limit: the grad norm grows for many steps before the NaN; the
    store shows that build-up, upstream of the NaN's step."""
    from stethoscope.debug.stored import stored_workflow

    path = tmp_path / "blowup"
    _train(path, 80, lambda i: 0.01 * 1.08 ** max(0, i - 30))
    d = json.loads(run_cli("debug", str(path), "--json", "--all", env=cli_env).stdout)
    nan = next(f for f in d["findings"] if f["workflow"] == "nan")
    w = stored_workflow({"type": "nan", "step": nan["step"]}, path)
    grads = w.steps[1]
    assert grads.status == "problem" and grads.stage == "parameters" and "an instability built up" in grads.found
    assert w.cause.stage in ("schedule", "parameters") and w.cause.title != "check the batch"
    assert "the update before it was finite but huge" in w.steps[0].found and "not this batch" in w.steps[0].found


def test_a_stored_report_places_the_cause(tmp_path):
    """The Monitor's re-run of the batch (debug_nonfinite) says where the NaN was born: the batch step uses it."""
    from stethoscope import Monitor
    from stethoscope.debug.stored import stored_workflow
    from tests.debug.models import batch, mse, net

    path = tmp_path / "run"
    model = net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with Monitor(path, model=model, optimizer=opt, strict=True, log_every=4,
                 debug_nonfinite=__import__("stethoscope.debug", fromlist=["x"]).NonfiniteWatch(loss_fn=mse)) as mon:
        for i in range(8):
            x, y = batch(i)
            if i == 5:
                x[2, 0] = float("nan")
            loss = mse(model(x), y)
            loss.backward()
            opt.zero_grad()  # no update: only step 5 is non-finite
            mon.step(i, loss=loss, batch=(x, y))
    from stethoscope.store.query import open_run

    with open_run(path) as reader:
        _, rows = reader.query("SELECT data FROM events WHERE kind = 'debug'")
    w = stored_workflow({"type": "nan", "step": 5}, path, json.loads(rows[0][0]))
    first = w.steps[0]
    assert first.status == "problem" and first.stage == "inputs" and w.cause is first
    assert "re-run by the Monitor: the batch already held NaN/Inf (batch[0])" in first.found
    assert "finite again at step 6: a transient" in first.found
