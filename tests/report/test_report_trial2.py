"""What user-trial-2 read wrong in a report: a run of several ranks showed rank 0's curves only, beside a straggler
finding naming rank 1, and did not say there were other ranks; a constant LR was drawn where the axis says 0."""

from __future__ import annotations

import json
import re

from click.testing import CliRunner

from stethoscope import Monitor
from stethoscope.cli.main import cli


def _rank(root, rank: int, monkeypatch, step_time: float) -> None:
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("WORLD_SIZE", "2")
    with Monitor(root, strict=True, serve=False) as mon:
        for step in range(40):
            mon.step(step, loss=3.0 - step / 40)
            mon.log({"perf/step_time_s": step_time}, step)


def test_a_two_rank_runs_report_has_per_rank_charts(tmp_path, monkeypatch):
    run = tmp_path / "run"
    _rank(run, 0, monkeypatch, 0.1)
    _rank(run, 1, monkeypatch, 0.3)
    assert sorted(p.name for p in run.glob("rank-*.sqlite")) == ["rank-00000.sqlite", "rank-00001.sqlite"]
    out = tmp_path / "r.html"
    result = CliRunner().invoke(cli, ["report", str(run), "-o", str(out)])
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert re.search(r"<span>ranks: <b>2</b></span>", page)
    titles = re.findall(r'"text":\s*"([^"]+) per rank"', page)
    assert {"train/loss", "perf/step_time_s"} <= set(titles)
    i = page.index('"perf/step_time_s per rank"')
    chart = page[page.rindex('"data"', 0, i):i]  # the chart's traces come before its layout's title
    assert '"rank 0"' in chart and '"rank 1"' in chart


def test_a_one_rank_runs_report_has_none(tmp_path):
    with Monitor(tmp_path / "run", strict=True, serve=False) as mon:
        for step in range(20):
            mon.step(step, loss=3.0 - step / 20)
    out = tmp_path / "r.html"
    assert CliRunner().invoke(cli, ["report", str(tmp_path / "run"), "-o", str(out)]).exit_code == 0
    assert " per rank" not in out.read_text()


def test_a_constant_series_is_drawn_at_its_value(tmp_path):
    """user-trial-2: a constant LR of 0.003 was drawn on plotly's default -1..1 axis, at what reads as 0."""
    with Monitor(tmp_path / "run", strict=True, serve=False) as mon:
        for step in range(20):
            mon.step(step, loss=3.0 - step / 20)
            mon.log({"opt/lr": 0.003}, step)
    out = tmp_path / "r.html"
    assert CliRunner().invoke(cli, ["report", str(tmp_path / "run"), "-o", str(out)]).exit_code == 0
    page = out.read_text()
    i = page.index('"text":"Learning rate"')
    yaxis = json.loads(page[page.index('"yaxis":', i) + len('"yaxis":'):page.index('},', page.index('"yaxis":', i)) + 1])
    low, high = yaxis["range"]
    assert low < 0.003 < high and low > 0  # the line sits inside the axis, away from 0
    j = page.index('"text":"Loss"')
    assert '"range"' not in page[page.index('"yaxis":', j):page.index('"yaxis2"', j)]  # a moving loss: autorange


def test_a_short_runs_duration_is_the_one_show_gives(tmp_path):
    """user-trial-3: a run of 0.56 s read 'duration: 0 min 0 s' in the report where `show` says 0.562s."""
    import re as _re

    with Monitor(tmp_path / "run", strict=True, serve=False) as mon:
        for step in range(20):
            mon.step(step, loss=3.0 - step / 20)
    shown = CliRunner().invoke(cli, ["show", str(tmp_path / "run")]).output
    seconds = float(_re.search(r"duration\s*│\s*([0-9.e+-]+)s", shown).group(1))
    out = tmp_path / "r.html"
    assert CliRunner().invoke(cli, ["report", str(tmp_path / "run"), "-o", str(out)]).exit_code == 0
    text = out.read_text()
    assert "0 min 0 s" not in text and f"{seconds:.3g} s" in text


def test_the_headline_beside_its_badge_names_the_type_not_the_severity_again(tmp_path):
    """user-trial-3: the report's top line read 'CRITICAL Critical at step 170: non-finite …'."""
    with Monitor(tmp_path / "run", strict=True, serve=False) as mon:
        for step in range(40):
            mon.step(step, loss=float("nan") if step >= 30 else 3.0 - step / 40)
    out = tmp_path / "r.html"
    assert CliRunner().invoke(cli, ["report", str(tmp_path / "run"), "-o", str(out)]).exit_code == 0
    head = re.search(r'<div class="st-headline">(.*?)</div>', out.read_text()).group(1)
    assert "Critical at step" not in head and "nan at step 30" in head and ">critical<" in head.lower()
