"""Resumes in a log (a series' step goes back) against lines printed late (Keras redraws its bar at 23, 22, 21
of 32): only a step back by at least the series' usual step forward starts a new session in `Table`."""

from __future__ import annotations

import json
from pathlib import Path

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.diagnose.table import Table
from stethoscope.importers import read_any
from stethoscope.logtext.columns import Columns
from stethoscope.records import Point

ROOT = Path(__file__).resolve().parents[1] / "assets" / "real_trainers"
CASES = {c["case"]: c for c in json.loads((ROOT / "labels.json").read_text())}


def _table(points: list[tuple[str, int, float]]) -> Table:
    return Table.from_columns(Columns.of(Point(name, step, value) for name, step, value in points))


def test_a_bar_redrawn_a_step_or_two_late_is_read_in_step_order() -> None:
    train = [("train/loss", s, 1.0) for s in (4, 8, 12, 17, 23, 22, 21, 28, 32, 36, 40)]
    t = _table(train[:5] + [("eval/loss", 32, 0.9), ("eval/loss", 64, 0.8)] + train[5:])
    assert t.steps.tolist() == sorted(set(t.steps.tolist()))  # one session, in step order: evals in place


def test_a_step_back_by_a_checkpoint_interval_is_still_a_resume() -> None:
    pts = [("train/loss", s, 2.0 - s / 100) for s in range(1, 61)] + [("train/loss", s, 1.6) for s in range(41, 81)]
    t = _table(pts)
    assert t.steps.tolist() == list(range(1, 61)) + list(range(41, 81))  # two sessions, each in order


def test_keras_console_late_redraws_do_not_split_the_nan_into_two_findings() -> None:
    # the bar printed 23, 22, 21 in epoch 17: read as a resume, every eval came before the rest of the train
    # loss and the eval NaN (736) was dated apart from the train NaN (705, the label)
    c = CASES["keras_fit-nan-s2-console"]
    (d,) = [diagnose_run(run) for run in read_any(ROOT / c["file"])]
    nan = [f for f in d.findings if f.type == "nan"]
    assert [f.step for f in nan] == [705]
