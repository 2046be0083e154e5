"""A W&B UI export of several runs side by side is several runs, each diagnosed on its own (wild-logs-3's
X2: 8 runs, only the one without a prefix was diagnosed, 3 runs that blew up went unreported)."""

from __future__ import annotations

import math

import pytest

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers import read_any
from stethoscope.records import LOSS
from tests.importers.series import series

_RUNS = ("calm-sun-1", "bold-sea-2", "gpt2")


def _loss(run: str, step: int) -> float:
    falling = 5.0 * math.exp(-step / 40) + 3.0 + 0.01 * math.sin(step)
    if run == "bold-sea-2" and step >= 60:  # blows up and stays up
        return 7.5 + 0.01 * math.sin(step)
    return falling


def _export(steps: dict[str, int]) -> str:
    header = ['"Step"'] + [f'"{r} - train/loss{band}"' for r in _RUNS for band in ("", "__MIN", "__MAX")]
    lines = [",".join(header)]
    for s in range(max(steps.values())):
        cells = [str(s)]
        for r in _RUNS:
            v = _loss(r, s) if s < steps[r] else None
            cells += ['""'] * 3 if v is None else [f'"{v}"', f'"{v}"', f'"{v}"']
        lines.append(",".join(cells))
    return "\n".join(lines) + "\n"


def test_each_run_of_an_export_is_a_run_of_its_own(write) -> None:
    runs = read_any(write("wandb_export.csv", _export({"calm-sun-1": 120, "bold-sea-2": 100, "gpt2": 150})))
    assert [r.meta.get("run_name") for r in runs] == list(_RUNS)
    by_name = {r.meta["run_name"]: r for r in runs}
    assert sorted(series(by_name["bold-sea-2"], LOSS)) == list(range(100))  # its blank cells are no steps
    assert series(by_name["calm-sun-1"], LOSS)[10] == pytest.approx(_loss("calm-sun-1", 10))
    assert all({p.name for p in r.points} == {LOSS} for r in runs)  # the __MIN/__MAX bands left out


def test_the_run_that_blew_up_is_diagnosed(write) -> None:
    runs = read_any(write("wandb_export.csv", _export({"calm-sun-1": 120, "bold-sea-2": 100, "gpt2": 150})))
    worst = {r.meta["run_name"]: max((f.severity for f in diagnose_run(r).findings), key=_rank, default="info")
             for r in runs}
    assert _rank(worst["bold-sea-2"]) >= _rank("warning")
    assert worst["calm-sun-1"] == "info"


def _rank(severity: str) -> int:
    return ("info", "warning", "error", "critical").index(severity)


def test_an_export_of_one_run_stays_one_run(write) -> None:
    text = '"Step","calm-sun-1 - train/loss","calm-sun-1 - train/loss__MIN"\n' + \
        "".join(f'"{s}","{5 - s / 10}","{5 - s / 10}"\n' for s in range(20))
    (run,) = read_any(write("wandb_export.csv", text))
    assert series(run, LOSS)[3] == pytest.approx(4.7)


def test_a_column_naming_no_run_keeps_the_table_one_run(write) -> None:
    text = "step,epoch,a - loss,b - loss\n" + "".join(f"{s},{s // 5},{5 - s / 10},{4 - s / 10}\n" for s in range(20))
    (run,) = read_any(write("metrics.csv", text))
    assert run.meta.get("run_name") is None
