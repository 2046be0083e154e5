"""Every resumed session of a stored run is found, not only the last: the Monitor records a resume event per resume
(the run table keeps only the newest resume time), and `diagnose`/`show` see a resume that lost the weights in the
second of three sessions. The SQL views users query are unchanged (no resume row among the findings). Real stores."""

from __future__ import annotations

import math

from click.testing import CliRunner

import stethoscope
from stethoscope.cli.main import cli
from stethoscope.diagnose.stored import incidents_at
from stethoscope.store.query import open_run


def _loss(k: int) -> float:
    """A run's loss k steps into its training (a noiseless fall, a wiggle for the detectors' noise)."""
    return 3.0 * math.exp(-k / 40) + 0.5 + 0.02 * math.sin(3 * k)


def _session(path, steps, trained_from: int) -> None:
    with stethoscope.Monitor(path, resume=True, serve=False) as mon:
        for i, step in enumerate(steps):
            mon.step(step, loss=_loss(trained_from + i), tokens=64)


def test_a_weightless_resume_in_the_middle_session_is_found(tmp_path):
    run = tmp_path / "run"
    _session(run, range(0, 150), 0)
    _session(run, range(150, 300), 0)  # resumed without loading the weights: the loss starts over
    _session(run, range(300, 400), 150)  # a good resume: the loss goes on where it stood
    with open_run(run) as r:
        _, rows = r.query("SELECT step, data FROM events WHERE kind = 'lifecycle' AND source = 'monitor'")
        assert [s for s, _ in rows] == [150, 300]
        _, types = r.query("SELECT DISTINCT type FROM findings")
        assert ("lifecycle",) not in types
    (d,) = incidents_at(run)
    lost = [f for f in d.findings if f.evidence.get("weights_not_loaded")]
    assert [f.evidence["resume_step"] for f in lost] == [150], [(f.type, f.step, f.message) for f in d.findings]
    out = CliRunner().invoke(cli, ["show", str(run)]).output
    assert "did not load the model weights" in out or "where the run began" in out, out
