"""Control.critical: the live detectors' first critical finding, noted on the writer thread as it is made."""

from __future__ import annotations

import math
import random

import stethoscope
from stethoscope.capture.control import is_critical
from stethoscope.records import Finding


def _noisy(step: int) -> float:
    return 2.0 + 0.3 * math.exp(-step / 50) + random.Random(step).gauss(0, 0.02)


def test_a_nonfinite_loss_is_critical_a_nonfinite_grad_norm_alone_is_not(tmp_path):
    with stethoscope.Monitor(tmp_path / "a", flush_interval=0.05) as mon:
        for step in range(40):
            mon.step(step, loss=_noisy(step), grad_norm=float("inf") if step == 5 else 1.0)
        mon.flush()
        assert mon.control.critical is None  # an fp16 overflow step the loss scaler skips looks like this
        mon.step(40, loss=float("nan"), grad_norm=1.0)
        mon.step(41, loss=float("nan"), grad_norm=1.0)  # the detectors see a step once the next one begins
        mon.flush()
        f = mon.control.critical
        assert f is not None and f.type == "nan" and f.step == 40
        mon.control.clear()  # requests are cleared; the finding stays
        assert mon.control.critical is f


def test_a_divergence_is_critical(tmp_path):
    with stethoscope.Monitor(tmp_path / "b", flush_interval=0.05) as mon:
        for step in range(300):
            loss = _noisy(step) if step < 200 else 2.0 * 1.05 ** (step - 200)
            mon.step(step, loss=loss, grad_norm=1.0)
        mon.flush()
        f = mon.control.critical
    assert f is not None and f.type == "divergence" and 195 <= f.step <= 215


def test_what_is_critical():
    assert is_critical(Finding("divergence", "error", 5, "up"))
    assert not is_critical(Finding("divergence", "info", 5, "up, but too short to say"))
    assert not is_critical(Finding("divergence", "error", 5, "up", evidence={"withdrawn": True}))
    assert not is_critical(Finding("nan", "critical", 5, "x", evidence={"series": ["grad/norm"]}))
    assert not is_critical(Finding("nan", "critical", 5, "x", end_step=9, evidence={"series": ["train/loss"]}))
    assert is_critical(Finding("nan", "critical", 5, "x", evidence={"series": ["train/loss"]}))
    assert not is_critical(Finding("loss_spike", "critical", 5, "x"))
