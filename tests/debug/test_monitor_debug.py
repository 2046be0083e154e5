"""Monitor(debug_nonfinite=...): a real tiny run with an injected NaN stores the locator's report as an event."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from stethoscope import Monitor  # noqa: E402
from stethoscope.debug import NonfiniteWatch  # noqa: E402
from stethoscope.store.query import open_run  # noqa: E402
from tests.debug.models import batch, hooks_left, mse, net  # noqa: E402


def _train(mon, model, opt, steps, make_batch, pass_batch=True):
    for i in range(steps):
        b = make_batch(i)
        loss = mse(model(b[0]), b[1])
        loss.backward()
        opt.step()
        opt.zero_grad()
        mon.step(i, loss=loss, batch=b if pass_batch else None)


def _nan_at(k):
    def make(i):
        x, y = batch(i)
        if i == k:
            x = x.clone()
            x[5, 1] = float("nan")
        return x, y
    return make


def _debug_events(run_dir):
    with open_run(run_dir) as r:
        _, rows = r.query("SELECT step, severity, source, message, data FROM events WHERE kind = 'debug'")
        _, findings = r.query("SELECT type, step, message FROM findings")
    return rows, findings


def test_an_injected_nan_batch_is_located_and_stored_as_an_event(tmp_path):
    model = net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    watch = NonfiniteWatch(loss_fn=mse)  # batches are (x, y): the model gets x, the loss y
    with Monitor(tmp_path, model=model, optimizer=opt, strict=True, log_every=4, debug_nonfinite=watch) as mon:
        _train(mon, model, opt, 12, _nan_at(6))
        watch = mon._nonfinite
    rows, findings = _debug_events(tmp_path)
    assert len(rows) == 1
    step, severity, source, message, data = rows[0]
    report = json.loads(data)
    assert step == 6 and severity == "critical" and source == "debug.locate_nonfinite"
    assert report["inputs_nonfinite"] == ["batch[0]"] and report["step"] == 6
    assert "the batch already held NaN/Inf" in message
    # the SGD step on NaN gradients broke the weights before the flush: the report says that too
    assert "inp.weight" in report["params_nonfinite"]
    assert any(t == "nan" or "nan at 6" in m for t, _, m in findings)  # the live detector's (maybe as a symptom)
    assert all(t != "debug" for t, _, _ in findings)  # the report is an event, not a finding of its own
    assert watch.reports[0].step == 6 and watch._batches == {}  # nothing held after the report
    assert hooks_left(model) == 0  # the locator's hooks went at once, the Monitor's at close
    assert mon.internal_errors == 0


def test_a_module_overflow_found_through_batch_for_step_holding_no_batch(tmp_path):
    model = net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    seen = []

    def batch_for_step(step):
        seen.append(step)
        return batch(step)

    watch = NonfiniteWatch(loss_fn=mse, batch_for_step=batch_for_step)
    with Monitor(tmp_path, model=model, optimizer=opt, strict=True, log_every=3, debug_nonfinite=watch) as mon:
        for i in range(9):
            model.blocks[1].act.armed = i >= 5  # a fault inside the model from step 5 on, not in the data
            x, y = batch(i)
            loss = model(x).sub(y).pow(2).mean()
            loss.backward()
            if torch.isfinite(loss):  # a careful loop (or a GradScaler) skips the non-finite step
                opt.step()
            opt.zero_grad()
            mon.step(i, loss=loss)  # no batch=: the watch fetches step 5's on demand
            assert mon._nonfinite._batches == {}
    rows, _ = _debug_events(tmp_path)
    report = json.loads(rows[0][4])
    assert seen == [5] and rows[0][0] == 5
    assert report["first_output"]["name"] == "blocks.1.act" and report["params_nonfinite"] == []
    assert "made" in rows[0][3] and "blocks.1.act" in rows[0][3]


def test_off_by_default_and_a_failing_rerun_never_reaches_training(tmp_path):
    model = net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with Monitor(tmp_path / "off", model=model, optimizer=opt, strict=True, log_every=2) as mon:
        _train(mon, model, opt, 6, _nan_at(2))
        assert mon._nonfinite is None
    assert _debug_events(tmp_path / "off")[0] == []

    def explode(model, b):
        raise RuntimeError("the re-run needs a device that is gone")

    model = net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    watch = NonfiniteWatch(forward=explode)
    with Monitor(tmp_path / "on", model=model, optimizer=opt, strict=True, log_every=2, debug_nonfinite=watch) as mon:
        _train(mon, model, opt, 6, _nan_at(2))
    rows, _ = _debug_events(tmp_path / "on")
    assert [(r[0], r[1]) for r in rows] == [(2, "warning")] and "device that is gone" in rows[0][3]
    assert mon.internal_errors == 0 and hooks_left(model) == 0


def test_no_batch_given_says_how_to_give_one(tmp_path):
    model = net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with Monitor(tmp_path, model=model, optimizer=opt, strict=True, log_every=2, debug_nonfinite=True) as mon:
        _train(mon, model, opt, 5, _nan_at(3), pass_batch=False)
    rows, _ = _debug_events(tmp_path)
    assert rows[0][0] == 3 and "pass batch= to mon.step" in rows[0][3]


def test_a_bad_option_fails_before_any_thread_starts(tmp_path):
    with pytest.raises(ValueError, match="debug_nonfinite must be"):
        Monitor(tmp_path, model=net(), debug_nonfinite="yes")
    with pytest.raises(ValueError, match="needs the model"):
        Monitor(tmp_path, debug_nonfinite=True)
    with pytest.raises(ValueError, match="max_reports"):
        NonfiniteWatch(max_reports=0)
