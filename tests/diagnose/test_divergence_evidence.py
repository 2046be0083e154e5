"""Evidence in proportion to the claim (user trial item 3): a detector calls a divergence `error` two records after
a jump under a raised LR; the live run and every view of it grade it by the records since, with one rule
(`detect.sustained`): the live record's last word is the views' (it said `error` where the views said `warning`).
Real tiny torch training (the MLP of tests/act/recovery_loop.py), the LR x100 for the run's last steps, a real
store."""

from __future__ import annotations

import pytest
import torch

from stethoscope.diagnose.stored import incidents_at, live_findings
from stethoscope.detect.sustained import SUSTAINED
from stethoscope.store.query import open_run
from tests.act import recovery_loop as loop

torch.set_num_threads(1)
STEPS = 250


def _run(path, blown: int) -> None:
    """The LR x100 for the last `blown` steps: the loss jumps and the run ends `blown - 2` records later."""
    loop.train_lr(path, STEPS, lambda step: 100.0 if step >= STEPS - blown else 1.0, schedule_steps=300)


def _divergence(path):
    with open_run(path) as r:
        live = [f for f in live_findings(r) if f.type == "divergence"]
    (d,) = incidents_at(path)
    return live, [f for f in d.findings if f.type == "divergence"]


@pytest.mark.parametrize("blown, severity", [(4, "warning"), (8, "error")], ids=["two_records", "sustained"])
def test_a_divergence_is_an_error_only_once_the_records_show_it_sustained(tmp_path, blown, severity):
    _run(tmp_path / "run", blown)
    live, (f,) = _divergence(tmp_path / "run")
    assert f.severity == severity == live[-1].severity, (f.message, live)  # the live record's last word
    assert all(g.severity == "warning" and "not sustained yet" in g.message for g in live[:-1]), live
    if severity == "warning":
        assert len(live) == 1 and live[0].evidence["records_up"] < SUSTAINED
    if severity == "warning":
        assert f.evidence["records_up"] < SUSTAINED and "not sustained yet" in f.message
    else:
        assert "records_up" not in f.evidence
