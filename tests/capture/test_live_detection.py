"""The detectors run live inside the Monitor (on the writer thread) and record findings as they happen."""

from __future__ import annotations

import json

import pytest

from stethoscope import Monitor
from stethoscope.diagnose.stored import live_findings
from stethoscope.records import severity_rank
from stethoscope.store.query import open_run
from stethoscope.testing import loss_curve

torch = pytest.importorskip("torch")


def _train(run, inject=None, steps=160, **options):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(1)
    with Monitor(run, model=model, optimizer=opt, tokens_per_step=64, strict=True, **options) as mon:
        for step in range(steps):
            x = torch.randn(64, 8, generator=gen)
            y = torch.sin(x.sum(1, keepdim=True))
            if inject == ("nan", step):
                x = x * float("nan")
            if inject == ("spike", step):
                y = y + 40.0  # a garbage batch: targets the model has never seen
            loss = ((model(x) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            if not torch.isfinite(loss):
                mon.step(step, loss=loss, batch_ids=[step * 64 + i for i in range(4)])
                continue  # the loop skips the bad batch, as a careful loop does
            opt.step()
            mon.step(step, loss=loss, batch_ids=[step * 64 + i for i in range(4)])


def _findings(run):
    with open_run(run) as r:
        return live_findings(r)


def test_nan_is_found_live_at_the_exact_step_once(tmp_path):
    _train(tmp_path, ("nan", 97))
    nan = [f for f in _findings(tmp_path) if f.type == "nan"]
    assert len(nan) == 1, nan
    assert nan[0].step == 97 and nan[0].severity == "critical"


def test_garbage_batch_spike_is_found_with_its_batch(tmp_path):
    # The garbage batch's SGD step costs this tiny model its progress: the loss comes back from x3000 within 11
    # steps but settles ~20% above its level before the batch to the end (40 steps), so the incident is a
    # divergence (detect.spike_level) with the batch that caused it, which a rollback skips.
    _train(tmp_path, ("spike", 120))
    spikes = [f for f in _findings(tmp_path) if f.type in ("loss_spike", "divergence")]
    assert spikes and spikes[0].step == 120, _findings(tmp_path)
    assert severity_rank(spikes[0].severity) >= severity_rank("warning")
    with open_run(tmp_path) as r:
        ids = json.loads(r.query("SELECT ids FROM batches WHERE step = 120")[1][0][0])
    assert ids == [120 * 64 + i for i in range(4)]
    assert spikes[0].evidence["batch_ids"] == ids
    assert "single bad batch at step 120 (samples 7680, 7681, 7682, 7683)" in spikes[0].causes[0]


def test_healthy_curve_raises_nothing_at_or_above_warning(tmp_path):
    with Monitor(tmp_path, strict=True) as mon:
        for step, value in enumerate(loss_curve(600, seed=3)):
            mon.step(step, loss=value, grad_norm=0.5 + 0.05 * ((step * 7919) % 13) / 13)
    # no compute between steps: their wall-clock times are the machine's noise, not the run's
    wall_clock = {"throughput_drop", "periodic_stall", "memory_leak", "memory_pressure"}
    loud = [f for f in _findings(tmp_path) if severity_rank(f.severity) >= severity_rank("warning")
            and f.type not in wall_clock]
    assert loud == []


def test_the_monitors_detect_config_reaches_the_live_detectors(tmp_path):
    from stethoscope.detect import DetectConfig

    deaf = DetectConfig(spike_sigma=1e9, loss_spike_min_rel=1e6, loss_spike_warn_rel=1e6)
    _train(tmp_path / "deaf", ("spike", 120), detect=deaf)
    _train(tmp_path / "default", ("spike", 120), detect=True)
    jumps = ("loss_spike", "divergence")
    assert 120 in [f.step for f in _findings(tmp_path / "default") if f.type in jumps]
    assert [f for f in _findings(tmp_path / "deaf") if f.type in jumps] == []


def test_detect_false_records_no_findings_and_a_wrong_detect_is_refused(tmp_path):
    from stethoscope import MonitorConfig

    _train(tmp_path, ("nan", 97), detect=False)
    assert _findings(tmp_path) == []
    with pytest.raises(ValueError, match="detect must be True, False or a DetectConfig"):
        MonitorConfig(detect={"spike_sigma": 3.0})
    with pytest.raises(ValueError, match="detect must be True, False or a DetectConfig"):
        Monitor(tmp_path / "other", detect=MonitorConfig())  # a dataclass, but not the detectors' config
