"""The HTML report: structure, escaping, downsampling, and a real headless Chromium rendering it."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from stethoscope.report.html import (
    MAX_POINTS,
    ReportInput,
    downsample,
    flatten,
    headline,
    render_compare,
    render_report,
)
from stethoscope.report.template import SEVERITY_COLORS
from stethoscope.records import Finding

EVIL = "<script>alert('pwned')</script>"


def series(n: int, seed: int = 0, spike_at: int | None = None, nan_at: int | None = None) -> dict:
    rng = np.random.default_rng(seed)
    steps = np.arange(n)
    loss = 2.0 + 6.0 * np.exp(-steps / max(1, n / 10)) + 0.03 * rng.standard_normal(n)
    grad = 0.4 + 0.05 * rng.random(n)
    if spike_at is not None:
        loss[spike_at], grad[spike_at - 2] = 11.0, 90.0
    if nan_at is not None:
        loss[nan_at : nan_at + 3] = np.nan
    every = max(1, n // 40)
    return {
        "train/loss": (steps.tolist(), loss.tolist()),
        "eval/loss": (steps[::every].tolist(), (loss[::every] + 0.1).tolist()),
        "grad/norm": (steps.tolist(), grad.tolist()),
        "opt/lr": (steps.tolist(), (3e-4 * np.minimum(1, steps / (n / 20 + 1))).tolist()),
        "perf/tokens_per_s": (steps.tolist(), (1e5 + 2e3 * rng.standard_normal(n)).tolist()),
        "memory/cuda_allocated_gib": (steps.tolist(), (20 + steps / n).tolist()),
    }


def findings(n: int) -> list[Finding]:
    return [
        Finding("loss_spike", "warning", int(n * 0.6), f"loss spike {EVIL}", evidence={"peak": 11.0},
                causes=["LR too high <b>"], fixes=["lower the LR"]),
        Finding("grad_explosion", "error", int(n * 0.6) - 2, "grad norm 90, 200x the median"),
        Finding("nan", "critical", int(n * 0.8), "train/loss is NaN", fixes=["use bf16"]),
        Finding("throughput_drop", "info", int(n * 0.3), "throughput dipped", end_step=int(n * 0.35)),
        Finding("memory_leak", "warning", None, "memory grows 1 GiB over the run"),
    ]


def run(n: int = 20_000, title: str = "gpt2 <small>", **meta: object) -> ReportInput:
    base = {"status": "finished", "start_time": 1.7e9, "end_time": 1.7e9 + 7260,
            "config": {"lr": 3e-4, "batch_size": 32, "model": {"n_layer": 12}}, "git": {"commit": "abc123"},
            "host": {"name": "node-1"}, "versions": {"torch": "2.13.0"}}
    return ReportInput(title, series(n, spike_at=int(n * 0.6), nan_at=int(n * 0.8)), findings(n), {**base, **meta})


def figures_of(page: str) -> list[dict]:
    m = re.search(r'<script type="application/json" id="st-figures">(.*?)</script>', page, re.S)
    assert m
    return json.loads(m.group(1))


def by_id(page: str) -> dict[str, dict]:
    return {f["id"]: f for f in figures_of(page)}


# -- downsampling -------------------------------------------------------------------------------


def test_downsample_keeps_spike_dip_and_nan_positions() -> None:
    n = 1_000_000
    y = np.full(n, 2.0)
    y[123_457], y[777_001] = 50.0, -3.0
    y[900_000:900_005] = np.nan
    y[950_000] = np.inf
    d = downsample(range(n), y.tolist())
    assert len(d.steps) <= MAX_POINTS and len(d.steps) == len(d.values)
    assert max(d.values) == 50.0 and d.steps[d.values.index(50.0)] == 123_457
    assert min(d.values) == -3.0 and d.steps[d.values.index(-3.0)] == 777_001
    assert all(math.isfinite(v) for v in d.values)
    assert d.nonfinite_steps == [900_000, 900_001, 900_002, 900_003, 900_004, 950_000]
    assert d.steps == sorted(d.steps)


def test_downsample_short_series_unchanged_but_nan_split_out() -> None:
    d = downsample([0, 1, 2, 3], [1.0, float("nan"), 3.0, 4.0])
    assert d.steps == [0, 2, 3] and d.values == [1.0, 3.0, 4.0] and d.nonfinite_steps == [1]


# -- structure ----------------------------------------------------------------------------------


def test_report_has_every_finding_escaped_and_no_network() -> None:
    page = render_report(run())
    assert page.startswith("<!DOCTYPE html>")
    for text in ("grad norm 90, 200x the median", "train/loss is NaN", "throughput dipped",
                 "memory grows 1 GiB over the run", "lower the LR", "use bf16"):
        assert text in page
    assert EVIL not in page and "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in page
    assert "gpt2 &lt;small&gt;" in page and "LR too high &lt;b&gt;" in page
    assert not re.search(r"<script[^>]*\bsrc\s*=", page, re.I)
    assert not re.search(r"<link[^>]*href\s*=\s*[\"']?https?:", page, re.I)
    assert not re.search(r"<(?:img|iframe)[^>]*src\s*=\s*[\"']?https?:", page, re.I)
    assert page.count("<script>") == 2  # plotly.js once, plus the small drawing script
    assert page.count("plotly.js v") == 1


def test_report_figures_and_finding_marks() -> None:
    figs = by_id(render_report(run()))
    assert set(figs) == {"st-loss", "st-grad_norm", "st-lr", "st-throughput", "st-memory"}
    loss = figs["st-loss"]
    names = [t["name"] for t in loss["data"] if t.get("showlegend", True) and t["mode"] != "markers"]
    assert names == ["train/loss", "eval/loss"]
    nan_marks = [t for t in loss["data"] if t["name"] == "train/loss NaN/Inf"]
    assert nan_marks and nan_marks[0]["x"] == [16000, 16001, 16002]
    assert figs["st-grad_norm"]["layout"]["yaxis"]["type"] == "log"
    assert figs["st-lr"]["layout"]["yaxis"]["type"] == "linear"
    marked = {fid: sorted(x for t in f["data"] if t["name"].endswith(" finding") for x in t["x"])
              for fid, f in figs.items()}
    assert marked["st-loss"] == [11998, 12000, 16000]  # spike, explosion (also on loss), NaN
    assert marked["st-grad_norm"] == [11998]
    assert marked["st-throughput"] == [6000]
    assert marked["st-lr"] == [] and marked["st-memory"] == []
    colors = {s["line"]["color"] for s in loss["layout"]["shapes"] if s["type"] == "line"}
    assert colors == {SEVERITY_COLORS["warning"], SEVERITY_COLORS["error"], SEVERITY_COLORS["critical"]}
    rect = [s for s in figs["st-throughput"]["layout"]["shapes"] if s["type"] == "rect"]
    assert rect and (rect[0]["x0"], rect[0]["x1"]) == (6000, 7000)
    hover = next(t for t in loss["data"] if t["name"] == "warning finding")["hovertext"][0]
    assert "&lt;script&gt;" in hover and "<script>" not in hover


def test_findings_table_is_ranked_by_severity() -> None:
    page = render_report(run())
    table = page[page.index('<table class="st-findings">') :]
    order = [table.index(text) for text in ("train/loss is NaN", "grad norm 90", "loss spike", "memory grows",
                                            "throughput dipped")]
    assert order == sorted(order)


def test_header_and_metadata() -> None:
    page = render_report(run(status="crashed"))
    assert "crashed" in page and "2 h 1 min" in page and "19999" in page
    assert headline(findings(100)) == "Critical at step 80: train/loss is NaN"
    assert "2023-11-14 22:13:20 UTC" in page  # start_time shown as a date
    for key in ("config.model.n_layer", "git.commit", "host.name", "versions.torch"):
        assert f"<th>{key}</th>" in page
    assert flatten({"a": {"b": {"c": 1}}, "d": "x", "e": float("nan")}) == {"a.b.c": "1", "d": "x", "e": '"nan"'}


def test_chart_only_when_series_exists_and_extra_series_get_their_own() -> None:
    only_loss = ReportInput("r", {"train/loss": ([0, 1, 2], [3.0, 2.0, 1.0]), "amp/loss_scale": ([0, 1], [65536.0, 32768.0]),
                                  "update/ratio": ([0, 1], [1e-3, 2e-3]), "memory/host_free_gib": ([0], [5.0])}, [], {})
    figs = by_id(render_report(only_loss))
    assert set(figs) == {"st-loss", "st-loss_scale", "st-memory", "st-other-0"}
    assert figs["st-loss_scale"]["layout"]["yaxis"]["type"] == "log"
    assert figs["st-other-0"]["data"][0]["name"] == "update/ratio"


def test_empty_run_renders() -> None:
    page = render_report(ReportInput("empty", {}, [], {}))
    assert "No series recorded" in page and "No problems found." in page and figures_of(page) == []


def test_per_rank_section() -> None:
    ranks = {k: {"perf/step_time_s": ([0, 1, 2], [0.1, 0.1 * (1 + k), 0.1])} for k in range(6)}
    figs = by_id(render_report(ReportInput("r", {}, [], {}, ranks=ranks)))
    assert len(figs["st-rank-0"]["data"]) == 6 and "Per rank" in render_report(ReportInput("r", {}, [], {}, ranks))


def test_million_step_report_stays_small() -> None:  # timing lives in bench/, never in tests
    page = render_report(run(1_000_000))
    assert len(page) < 8_000_000, len(page)
    loss = by_id(page)["st-loss"]["data"][0]
    assert max(loss["y"]) == 11.0 and len(loss["x"]) <= MAX_POINTS


def test_compare_config_diff_and_overlaid_curves() -> None:
    a = run(5000, title="lr-3e-4")
    b = run(3000, title="lr-6e-4 <x>", config={"lr": 6e-4, "batch_size": 32, "model": {"n_layer": 12}})
    b.series.pop("grad/norm")
    page = render_compare([a, b])
    diff = re.findall(r'<tr class="st-diff"><th>([^<]+)</th>', page)
    assert diff == ["config.lr"]
    assert len(re.findall(r'<tr class="st-same">', page)) > 5 and 'id="st-show-all"' in page
    assert "lr-6e-4 &lt;x&gt;" in page and "lr-6e-4 <x>" not in page
    figs = {f["layout"]["title"]["text"]: f for f in figures_of(page)}
    lines = {k: [t["name"] for t in f["data"] if t.get("showlegend", True)] for k, f in figs.items()}
    assert lines["train/loss"] == ["lr-3e-4", "lr-6e-4 &lt;x&gt;"]
    assert lines["grad/norm"] == ["lr-3e-4"]
    assert list(figs)[:2] == ["train/loss", "eval/loss"]
    assert page.count("plotly.js v") == 1


# -- a real browser -----------------------------------------------------------------------------

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome", "headless_shell")


def chromium() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def browse(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--virtual-time-budget=10000"]
    return subprocess.run([binary, *flags, *args], capture_output=True, text=True, timeout=180, check=False)


def chart_segments(dom: str, ids: list[str]) -> dict[str, str]:
    starts = {fid: dom.index(f'id="{fid}"') for fid in ids}
    ordered = sorted(starts.items(), key=lambda kv: kv[1])
    ends = [pos for _, pos in ordered[1:]] + [dom.index("</main>")]
    return {fid: dom[pos:end] for (fid, pos), end in zip(ordered, ends)}


@pytest.mark.slow
def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    binary = chromium()
    if binary is None:
        pytest.skip("no chromium binary on PATH (install it: apt-get install -y chromium)")
    report = tmp_path / "report.html"
    report.write_text(render_report(run(200_000)), encoding="utf-8")
    ids = [f["id"] for f in figures_of(report.read_text(encoding="utf-8"))]

    dom = browse(binary, tmp_path / "profile-dom", "--dump-dom", report.as_uri()).stdout
    assert "js-plotly-plot" in dom, dom[-2000:]
    for fid, segment in chart_segments(dom, ids).items():
        assert "js-plotly-plot" in segment.split(">", 1)[0], fid
        assert segment.count('class="main-svg"') >= 2, fid
        paths = re.findall(r'class="js-line"[^>]*\sd="([^"]*)"|\sd="([^"]*)"[^>]*class="js-line"', segment)
        drawn = [p for pair in paths for p in pair if p.startswith("M") and len(p) > 20]
        assert drawn, f"{fid}: no line drawn"
    loss = chart_segments(dom, ids)["st-loss"]
    assert loss.count('class="point"') >= 3  # finding markers and NaN markers are drawn
    assert "shapelayer" in loss

    shot = tmp_path / "report.png"
    browse(binary, tmp_path / "profile-png", f"--screenshot={shot}", "--window-size=1400,2400", report.as_uri())
    assert shot.is_file() and shot.stat().st_size > 50_000
    image = pytest.importorskip("PIL.Image").open(shot).convert("RGB")
    assert image.size == (1400, 2400)
    pixels = np.asarray(image).reshape(-1, 3)
    colors = np.unique(pixels[::7], axis=0)
    assert len(colors) > 200, "screenshot looks blank"
    blue = np.all(np.abs(pixels.astype(int) - (0x2F, 0x6F, 0xDF)) < 30, axis=1).sum()
    assert blue > 2000, "the first series' line colour is (almost) absent: charts did not draw"
