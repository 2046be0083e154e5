from __future__ import annotations

import json
import subprocess
import sys

import pytest

from stethoscope.detect.config import DetectConfig
from stethoscope.detect.registry import DetectorSet, default_detectors, merge_findings
from stethoscope.errors import InternalError
from stethoscope.records import Finding, StepRecord

from .conftest import healthy_run


def test_default_detectors_are_fresh_and_named():
    a, b = default_detectors(), default_detectors()
    assert [d.name for d in a] == [d.name for d in b]
    assert all(x is not y for x, y in zip(a, b))
    assert len({d.name for d in a}) == len(a)


def test_state_dict_roundtrip_is_json_and_bounded():
    records = healthy_run(n=4000)
    ds = DetectorSet()
    for r in records[:2000]:
        ds.update(r)
    state = json.loads(json.dumps(ds.state_dict()))
    assert len(json.dumps(state)) < 200_000
    resumed = DetectorSet()
    resumed.load_state_dict(state)
    fresh_tail = DetectorSet()
    late = [f for r in records[2000:] for f in resumed.update(r)]
    assert not [f for f in late if f.severity != "info"]
    assert fresh_tail is not resumed


class _Boom:
    name = "boom"

    def update(self, record):
        raise RuntimeError("bug")

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


def test_a_failing_detector_is_counted_not_fatal():
    ds = DetectorSet([_Boom()] + default_detectors())
    ds.update(StepRecord(1, {"train/loss": 1.0}))
    ds.update(StepRecord(2, {"train/loss": 1.0}))
    assert ds.errors == 2
    with pytest.raises(InternalError):
        DetectorSet([_Boom()], strict=True).update(StepRecord(1, {}))


def test_merge_keeps_the_last_follow_up_and_escalations_replace():
    a = Finding("loss_spike", "warning", 10, "spiked", source="spike")
    b = Finding("loss_spike", "warning", 10, "spiked; recovered", end_step=20, source="spike")
    g = Finding("grad_spike", "info", 8, "blip", source="spike")
    e = Finding("grad_explosion", "error", 8, "boom", source="spike")
    merged = merge_findings([a, g, b, e])
    assert [f.message for f in merged] == ["spiked; recovered", "boom"]


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="spike_sigma"):
        DetectConfig(spike_sigma=-1)
    with pytest.raises(ValueError, match="vocab_size"):
        DetectConfig(vocab_size=1)


def test_detect_is_pure_no_torch_no_numpy_no_io():
    code = (
        "import sys, builtins, io\n"
        "import stethoscope.detect.registry as reg\n"
        "heavy = [m for m in ('torch', 'numpy', 'sqlite3', 'socket') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "def no_io(*a, **k): raise AssertionError('detector did I/O')\n"
        "builtins.open = io.open = no_io\n"
        "from stethoscope.records import StepRecord\n"
        "ds = reg.DetectorSet(strict=True)\n"
        "for s in range(500): ds.update(StepRecord(s, {'train/loss': 3.0 + (s % 7) * 0.01, 'grad/norm': 1.0,"
        " 'opt/lr': 1e-4, 'perf/step_time_s': 0.02, 'eval/loss': 3.1}))\n"
        "ds.finish(); ds.state_dict()\n"
        "print('ok')\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "ok"
