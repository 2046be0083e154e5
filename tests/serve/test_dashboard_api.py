"""The dashboard's JSON API over a real loopback HTTP server, and its downsampling."""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stethoscope import Monitor
from stethoscope import records as R
from stethoscope.report.html import downsample
from stethoscope.serve import data
from stethoscope.serve.dashboard import App, plotly_js_path
from stethoscope.serve.http import Server
from stethoscope.store.db import RunStore, rank_path


def _run(path, steps=400, spike=300, ranks=1):
    for rank in range(ranks):
        with Monitor(path, rank=rank, world_size=ranks, flush_interval=0.1, config={"lr": 0.1}) as mon:
            for s in range(steps):
                loss = 3.0 * math.exp(-s / 80) + 0.5 + (20.0 if s == spike else 0.0) + 0.01 * rank
                mon.step(s, loss=loss, grad_norm=1.0 + (30.0 if s == spike else 0.0), tokens=64, **{R.LR: 0.1},
                         **{"eval/accuracy": s / steps})
                if s % 100 == 0:
                    mon.eval(s, eval_loss=loss + 0.2)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    _run(root / "a")
    _run(root / "b", steps=200, spike=-1, ranks=2)
    return root


@pytest.fixture
def server(runs):
    srv = Server(App([runs / "a", runs / "b"]))
    srv.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _get(server, path):
    try:
        with urllib.request.urlopen(server.url + path.lstrip("/"), timeout=30) as r:
            return r.status, r.headers["Content-Type"], r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read()


def _json(server, path):
    status, ctype, body = _get(server, path)
    assert status == 200 and ctype == "application/json", (status, body[:200])
    return json.loads(body)


def _trace(d, chart, metric, rank=0):
    c = next(c for c in d["charts"] if c["id"] == chart)
    return next(t for t in c["traces"] if t["metric"] == metric and t["rank"] == rank)


def test_runs_list_and_page_and_plotly_served_from_the_package(server):
    d = _json(server, "/api/runs")
    assert [(r["key"], r["ranks"], r["last_step"]) for r in d["runs"]] == [("a", 1, 399), ("b", 2, 199)]
    assert d["runs"][0]["findings"]["warning"] + d["runs"][0]["findings"]["error"] >= 1
    status, ctype, page = _get(server, "/")
    assert status == 200 and ctype.startswith("text/html") and b'src="static/plotly.min.js"' in page
    assert b"http" not in page.replace(b"http-equiv", b"")  # nothing from a CDN: the page works offline
    status, _, js = _get(server, "/static/plotly.min.js")
    assert status == 200 and js == plotly_js_path().read_bytes() and len(js) > 1_000_000
    status, ctype, css = _get(server, "/static/style.css")
    assert status == 200 and b".st-chart" in css and b".sd-layout" in css  # the report's styles, then ours


def test_curves_have_every_chart_and_a_line_per_rank(server):
    d = _json(server, "/api/curves?run=a")
    assert {"loss", "grad_norm", "lr", "throughput", "step_time", "memory"} <= {c["id"] for c in d["charts"]}
    loss = _trace(d, "loss", R.LOSS)
    assert loss["x"] == list(range(400)) and loss["n"] == 400 and max(loss["y"]) > 20
    assert _trace(d, "loss", R.EVAL_LOSS)["x"] == [0, 100, 200, 300]
    assert d["last_step"] == 399 and d["ranks"] == [0]
    other = next(c for c in d["charts"] if c["title"] == "eval/accuracy")  # a metric of the user's own
    assert other["id"].startswith("other-") and other["traces"][0]["y"][-1] == pytest.approx(399 / 400)
    b = _json(server, "/api/curves?run=b")
    per_rank = next(c for c in b["charts"] if c["id"] == f"rank-{R.LOSS}")
    assert per_rank["per_rank"] and [t["rank"] for t in per_rank["traces"]] == [0, 1]
    assert per_rank["traces"][1]["y"][0] == pytest.approx(per_rank["traces"][0]["y"][0] + 0.01)


def test_curves_are_thinned_to_the_points_asked_and_keep_the_spike(server):
    d = _json(server, "/api/curves?run=a&points=40")
    loss = _trace(d, "loss", R.LOSS)
    assert len(loss["x"]) <= 40 and loss["n"] == 400
    assert 300 in loss["x"] and max(loss["y"]) == pytest.approx(3.0 * math.exp(-300 / 80) + 20.5, rel=1e-5)
    zoom = _json(server, "/api/curves?run=a&points=40&lo=280&hi=320")
    z = _trace(zoom, "loss", R.LOSS)
    assert z["x"][0] >= 280 and z["x"][-1] <= 320 and 300 in z["x"]


def test_after_gives_only_newer_points(server):
    d = _json(server, "/api/curves?run=a&after=389")
    loss = next(t for t in d["traces"] if t["metric"] == R.LOSS)
    assert loss["x"] == list(range(390, 400))
    assert d["last_step"] == 399 and not d.get("reload")
    assert _json(server, "/api/curves?run=a&after=399")["traces"] == []


def test_a_rewrite_of_steps_already_shown_changes_the_version(tmp_path):
    _run(tmp_path / "r", steps=50, spike=-1)
    app = App([tmp_path / "r"])
    before = json.loads(app.handle("GET", "/api/curves", "run=r")[2])["version"]
    store = RunStore(rank_path(tmp_path / "r", 0))
    store.write_points([(R.LOSS, s, 9.0, None) for s in range(40, 45)])  # a rollback re-records these
    store.close()
    after = json.loads(app.handle("GET", "/api/curves", "run=r&after=49")[2])
    assert after["version"] != before
    assert json.loads(app.handle("GET", "/api/curves", "run=r")[2])["charts"][0]["traces"][0]["y"][40] == 9.0


def test_events_list_findings_with_causes_and_fixes(server):
    d = _json(server, "/api/events?run=a")
    spike = next(f for f in d["findings"] if f["type"] == "loss_spike")
    assert spike["step"] == 300 and spike["causes"] and spike["fixes"] and "loss" in spike["charts"]
    assert d["alerts"] == [] and d["timeline"] == []
    s = _json(server, "/api/summary?run=a")
    assert s["summary"]["last_step"] == 399 and s["config"] == {"lr": "0.1"}


def test_a_findings_key_survives_an_earlier_finding_joining_the_list():
    # The page keeps the finding a person clicked selected across polls by its key; a list index would
    # move the selection (and the bold mark on the chart) to whatever finding took that place.
    spike = R.Finding("loss_spike", "warning", 150, "loss spiked")
    before = data.finding_keys([spike])
    grown = [R.Finding("grad_explosion", "error", 149, "grad norm jumped"), spike,
             R.Finding("loss_spike", "warning", 150, "a second one at that step")]
    after = data.finding_keys(grown)
    assert after[1] == before[0] == "loss_spike@150"
    assert len(set(after)) == 3 and data.finding_json(spike, after[1])["id"] == "loss_spike@150"


@pytest.mark.parametrize("path, status", [
    ("/api/curves?run=nope", 404), ("/api/curves", 400), ("/api/curves?run=a&after=x", 400),
    ("/static/../../etc/passwd", 404), ("/static/nothing.js", 404), ("/api/nothing?run=a", 404), ("/elsewhere", 404)])
def test_bad_requests_are_one_line_answers(server, path, status):
    code, ctype, body = _get(server, path)
    assert code == status and ctype.startswith("text/plain") and b"\n" not in body.strip()


def test_the_handler_needs_no_server(runs):
    status, ctype, body = App([runs / "a"]).handle("GET", "/api/runs", {})
    assert status == 200 and json.loads(body)["runs"][0]["key"] == "a"
    assert App([runs / "a"]).handle("POST", "/api/runs", "")[0] == 405


# -- downsampling: min and max per bucket, spikes never dropped --------------------------------------


@settings(max_examples=60, deadline=None)
@given(n=st.integers(10, 5000), max_points=st.integers(4, 400), seed=st.integers(0, 2**32 - 1),
       nan_frac=st.sampled_from([0.0, 0.01, 0.3]))
def test_downsampling_keeps_each_buckets_min_and_max(n, max_points, seed, nan_frac):
    rng = np.random.default_rng(seed)
    x = np.cumsum(rng.integers(1, 4, n))
    y = rng.normal(size=n).cumsum()
    y[rng.random(n) < nan_frac] = np.nan
    d = downsample(x, y, max_points)
    assert len(d.steps) <= max(max_points, 2) and d.steps == sorted(d.steps)
    kept = dict(zip(d.steps, d.values))
    assert set(d.nonfinite_steps) == set(x[~np.isfinite(y)].tolist()) or len(d.nonfinite_steps) == max_points
    if n <= max_points:
        assert d.steps == x[np.isfinite(y)].tolist()
        return
    size = math.ceil(n / (max(2, max_points) // 2))
    for a in range(0, n, size):
        xb, yb = x[a:a + size], y[a:a + size]
        ok = np.isfinite(yb)
        if ok.any():  # the bucket's extremes are drawn at their own steps
            assert kept[int(xb[ok][np.argmin(yb[ok])])] == yb[ok].min()
            assert kept[int(xb[ok][np.argmax(yb[ok])])] == yb[ok].max()


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), spikes=st.integers(1, 20))
def test_spikes_a_bucket_apart_all_survive_a_million_steps(seed, spikes):
    rng = np.random.default_rng(seed)
    n, max_points = 1_000_000, data.MAX_POINTS
    y = 2.0 + 0.01 * rng.normal(size=n)
    bucket = math.ceil(n / (max_points // 2))
    at = rng.choice(n // bucket, spikes, replace=False) * bucket + rng.integers(0, bucket, spikes)
    y[at] = 50.0 + rng.random(spikes)
    d = downsample(np.arange(n), y, max_points)
    assert set(at.tolist()) <= set(d.steps)
    assert len(d.steps) <= max_points


def test_short_values_keep_six_significant_digits():
    y = np.array([0.1 + 0.2, 123456789.0, -3.14159265, 1e-12 * math.pi, 0.0, math.nan, math.inf])
    got = data._short(y)
    assert got[:5].tolist() == [0.3, 123457000.0, -3.14159, 3.14159e-12, 0.0]
    assert math.isnan(got[5]) and got[6] == math.inf


def test_a_long_series_is_drawn_from_its_chunks_extremes_without_losing_any(tmp_path):
    from stethoscope.store import packed
    from stethoscope.store.query import open_run

    n = 20 * 1024 + 200  # sealed chunks and an unsealed tail
    rng = np.random.default_rng(1)
    y = rng.normal(size=n).cumsum()
    spikes = [777, 12_000, n - 10]  # in chunks a few buckets apart, and in the tail
    y[spikes] += 1e4
    nans = [3, 9000, 9001, n - 5]
    y[nans] = np.nan
    store = RunStore(rank_path(tmp_path, 0))
    for a in range(0, n - 200, 1024):  # the writer's batches: each seals a chunk
        store.write_points([(R.LOSS, k, float(y[k]), None) for k in range(a, min(a + 1024, n - 200))])
    store.write_points([(R.LOSS, k, float(y[k]), None) for k in range(n - 200, n)])  # fewer than MIN_CHUNK: rows
    store.close()
    assert packed.MIN_CHUNK > 200
    with open_run(tmp_path) as reader:
        ext = reader.series_extremes(R.LOSS)
        t = data.line(reader, R.LOSS, 0, 60)
        zoom = data.line(reader, R.LOSS, 0, 2000, lo=11_990, hi=12_010)
        fine = data.line(reader, R.LOSS, 0, 2000)  # chunks wider than its buckets: drawn from the points
    assert ext["n"] == n and ext["nonfinite"].tolist() == nans
    assert len(ext["steps"]) <= 2 * 20 + 200
    for c in range(20):  # every chunk's finite min and max are among what the chart is drawn from
        a = c * 1024
        block = y[a:a + 1024]
        assert a + int(np.nanargmax(block)) in ext["steps"] and a + int(np.nanargmin(block)) in ext["steps"]
    assert len(t["x"]) <= 60 and set(spikes) <= set(t["x"]) and t["nonfinite"] == nans and t["n"] == n
    assert t["last"] == n - 1 and ext["last"] == n - 1
    assert 1500 < len(fine["x"]) <= 2000 and set(spikes) <= set(fine["x"]) and fine["n"] == n
    assert zoom["x"] == list(range(11_990, 12_011))  # a zoomed window: the points themselves
    assert zoom["y"][10] == pytest.approx(y[12_000], rel=1e-5)


def test_a_run_of_more_ranks_than_sqlite_attaches_has_a_line_per_rank(tmp_path):
    _run(tmp_path / "wide", steps=40, spike=-1, ranks=11)
    app = App([tmp_path / "wide"])
    first = json.loads(app.handle("GET", "/api/curves", "run=wide")[2])
    assert first["ranks"] == list(range(11))
    per_rank = next(c for c in first["charts"] if c["id"] == f"rank-{R.LOSS}")
    assert [t["rank"] for t in per_rank["traces"]] == list(range(11))
    assert per_rank["traces"][10]["y"][0] == pytest.approx(3.5 + 0.1)
    runs = json.loads(app.handle("GET", "/api/runs", "")[2])["runs"]
    assert runs[0]["ranks"] == 11 and runs[0]["last_step"] == 39
