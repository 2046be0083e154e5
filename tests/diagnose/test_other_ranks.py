"""A problem one rank alone recorded is the run's problem: a NaN on rank 1 of a two-rank run was 'healthy' in
`show`, `diagnose`, `report`, `watch` and the dashboard, which concluded on the lowest rank only (user-trial-4).
Now the run's incidents hold what any rank's live detectors recorded at warning or above, named 'on rank k', and a
problem every rank saw is said once. Real stores written by a Monitor per rank."""

from __future__ import annotations

import math

from click.testing import CliRunner

from stethoscope import Monitor
from stethoscope.cli.main import cli
from stethoscope.diagnose.stored import incidents_at


def _run(path, nan_on: tuple[int, ...]) -> None:
    for rank in (0, 1):
        with Monitor(str(path), rank=rank, world_size=2, serve=False) as mon:
            for s in range(200):
                bad = rank in nan_on and s >= 150
                mon.step(s, loss=3.0 * math.exp(-s / 60) + 0.5 + (float("nan") if bad else 0.0), tokens=64)


def test_a_nan_on_rank_1_alone_is_the_runs_incident_in_every_view(tmp_path):
    _run(tmp_path / "two", nan_on=(1,))
    (d,) = incidents_at(tmp_path / "two")
    nan = [f for f in d.findings if f.type == "nan"]
    assert len(nan) == 1 and nan[0].severity == "critical" and nan[0].step == 150
    assert nan[0].message.startswith("on rank 1: ") and nan[0].evidence["rank"] == 1
    for verb in ("diagnose", "show"):
        out = CliRunner().invoke(cli, [verb, str(tmp_path / "two")]).output
        assert "on rank 1" in out and "healthy" not in out.lower(), (verb, out)
    (one,) = incidents_at(tmp_path / "two", rank=0)  # asked for rank 0: rank 0's own incidents
    assert not [f for f in one.findings if f.type == "nan"]


def test_a_nan_every_rank_saw_is_said_once_by_the_lowest(tmp_path):
    _run(tmp_path / "both", nan_on=(0, 1))
    (d,) = incidents_at(tmp_path / "both")
    nan = [f for f in d.findings if f.type == "nan"]
    assert len(nan) == 1 and not nan[0].message.startswith("on rank")
