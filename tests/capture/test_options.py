"""Monitor options: a few common keywords, the rest in typed objects (capture/options.py) or as plain keywords."""

from __future__ import annotations

import inspect

import pytest

from stethoscope import Monitor
from stethoscope.capture.options import Parts, Placement, StepFacts, split_options
from stethoscope.store.query import open_run
from stethoscope.testing import FakeDeviceMemory

torch = pytest.importorskip("torch")


def test_the_constructor_takes_at_most_twelve_parameters():
    params = [p for p in inspect.signature(Monitor.__init__).parameters.values() if p.kind is not p.VAR_KEYWORD]
    assert len(params) <= 12, [p.name for p in params]


def test_plain_keywords_land_on_the_typed_objects_and_win_over_their_fields():
    facts, parts, placement, rest = split_options(
        {"max_grad_norm": 1.0, "checkpoints": "ck", "rank": 3, "flush_interval": 0.5},
        StepFacts(max_grad_norm=9.0, seq_len=64), None, Placement(world_size=4))
    assert facts == StepFacts(max_grad_norm=1.0, seq_len=64)
    assert parts == Parts(checkpoints="ck")
    assert placement == Placement(rank=3, world_size=4)
    assert rest == {"flush_interval": 0.5}  # left for MonitorConfig


def _run(run_dir, **options):
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with Monitor(run_dir, model=model, optimizer=opt, serve=False, detect=False, strict=True, log_every=1,
                 system_every=0.001, **options) as mon:
        for step in range(3):
            loss = model(torch.ones(2, 4)).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            mon.step(step, loss=loss, samples=2)
        assert mon.rank == 0
    with open_run(run_dir) as r:
        return {n for (n,) in r.query("SELECT name FROM series")[1]}


def test_typed_objects_and_plain_keywords_record_the_same_series(tmp_path):
    fake = FakeDeviceMemory()
    by_keyword = _run(tmp_path / "kw", max_grad_norm=0.5, rank=0, world_size=1, device_memory=fake)
    typed = _run(tmp_path / "typed", facts=StepFacts(max_grad_norm=0.5),
                 placement=Placement(rank=0, world_size=1, device_memory=FakeDeviceMemory()))
    assert by_keyword == typed
    assert {"grad/clip_coef", "train/loss", "perf/samples_per_s"} <= typed
    assert any(name.startswith("memory/") for name in typed)  # the fake device memory reached the flush


def test_an_unknown_keyword_is_still_refused(tmp_path):
    with pytest.raises(TypeError, match="max_grad"):
        Monitor(tmp_path, max_grad=1.0)
