"""The Monitor's observer chain (capture/observers.py): one ordered list decides who sees a finding first."""

from __future__ import annotations

import pytest

from stethoscope import Checkpoints, Monitor, Recovery
from stethoscope.act.config import AlertsConfig
from stethoscope.capture.observers import DetectionStage, ObserverChain
from stethoscope.records import Finding
from stethoscope.testing import MemoryChannel, MemoryExporter

torch = pytest.importorskip("torch")


class _Stage:
    """Adds one finding named after itself and notes what it was given."""

    def __init__(self, name: str, seen: list, fail: bool = False) -> None:
        self.name, self.seen, self.fail = name, seen, fail

    def see(self, points, findings):
        self.seen.append((self.name, [f.type for f in findings], len(points)))
        if self.fail:
            raise RuntimeError(f"{self.name} broke")
        return findings + [Finding(self.name, "info", 1, self.name)]

    def end(self, findings):
        self.seen.append((self.name, "end"))
        return findings


def test_each_stage_sees_the_findings_of_the_stages_before_it_in_list_order():
    seen: list = []
    chain = ObserverChain([_Stage("a", seen), _Stage("b", seen), _Stage("c", seen)])
    found = chain.observe([("train/loss", 1, 2.0, 0.0)])
    assert [f.type for f in found] == ["a", "b", "c"]
    assert seen == [("a", [], 1), ("b", ["a"], 1), ("c", ["a", "b"], 1)]
    chain.finish()
    assert seen[3:] == [("a", "end"), ("b", "end"), ("c", "end")]


def test_a_failing_stage_does_not_keep_the_batch_from_the_stages_after_it_and_is_raised_once():
    seen: list = []
    chain = ObserverChain([_Stage("a", seen), _Stage("b", seen, fail=True), _Stage("exports", seen)])
    with pytest.raises(RuntimeError, match="b broke"):
        chain.observe([("train/loss", 1, 2.0, 0.0), ("grad/norm", 1, 1.0, 0.0)])
    assert seen[-1] == ("exports", ["a"], 2)  # the last stage still got the points and what came before the failure


def test_the_monitor_builds_one_chain_in_the_documented_order(tmp_path):
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ck = Checkpoints(tmp_path / "ckpt", every=1000, on_signal=None)
    exporter = MemoryExporter()
    with Monitor(tmp_path / "run", model=model, optimizer=opt, serve=True, alerts=AlertsConfig([MemoryChannel()]),
                 checkpoints=ck, recovery=Recovery(), export=[exporter], strict=True) as mon:
        chain, = mon._recorder.observers
        kinds = [type(stage).__name__ for stage in chain.stages]
        assert isinstance(chain.stages[0], DetectionStage)
        assert kinds == ["DetectionStage", "FindingInbox", "LiveAlerts", "RecoveryPolicy", "CriticalWatch", "LiveExport"]
        gen = torch.Generator().manual_seed(0)
        for step in range(40):
            x = torch.randn(16, 4, generator=gen) * (float("nan") if step == 30 else 1.0)
            loss = ((model(x) - 1.0) ** 2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            mon.step(step, loss=loss)
        mon.flush()
        critical = mon.control.critical  # noted by the stage after the detectors, the probe, the rules and recovery
        assert critical is not None and critical.type == "nan" and critical.step == 30
    assert "nan" in [f.type for f in exporter.findings if f.step == 30]  # the exports, last, got the same finding


def test_without_detectors_only_the_exports_observe(tmp_path):
    exporter = MemoryExporter()
    with Monitor(tmp_path / "run", detect=False, serve=False, export=[exporter], strict=True) as mon:
        chain, = mon._recorder.observers
        assert [type(stage).__name__ for stage in chain.stages] == ["LiveExport"]
        mon.step(0, loss=1.0)
    assert ("train/loss", 0) in [(name, step) for name, step, _, _ in exporter.points]
    with Monitor(tmp_path / "bare", detect=False, serve=False, strict=True) as mon:
        assert mon._recorder.observers == []
