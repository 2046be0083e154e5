"""The capture and record paths store the same points as before their host cost was cut (issue 28.2): a fixed
run, with defaults and with `grad_norm=` passed plus `max_grad_norm`, stores the series, steps and values
of tests/capture/assets/stored_points.json, written by tests/capture/stored_points_run.py from the tree before."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from stored_points_run import run  # noqa: E402

GOLDEN = json.loads((Path(__file__).parent / "assets" / "stored_points.json").read_text())


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_a_fixed_run_stores_the_same_points_as_before(tmp_path, case) -> None:
    got = run(tmp_path / "run", clip=case == "grad_norm passed")
    want = GOLDEN[case]
    assert [p[:2] for p in got["points"]] == [p[:2] for p in want["points"]]  # series and steps, one for one
    for (name, step, value), (_, _, expected) in zip(got["points"], want["points"]):
        if expected is None:  # a clock's or the host's value: present at that step, any value
            continue
        assert value == pytest.approx(expected, rel=1e-6, abs=1e-12), (name, step)
    assert got["batches"] == want["batches"]  # every step's batch ids, once
