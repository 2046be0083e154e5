"""The dashboard in a real headless Chromium (Playwright) on a live run: a real tiny torch training in a
subprocess writes through a Monitor while the page polls the real HTTP server."""

from __future__ import annotations

import io
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stethoscope import Monitor
from stethoscope.serve.dashboard import App
from stethoscope.serve.http import Server
from tests.serve import live_run

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install chromium)"),
]


def _finished_run(path: Path) -> None:
    with Monitor(path, flush_interval=0.1, config={"lr": 0.1, "hidden": 16}) as mon:
        for s in range(300):
            mon.step(s, loss=3.0 * math.exp(-s / 80) + 0.4, grad_norm=1.0, tokens=64, lr=0.1)


def _wait(predicate, timeout: float = 60.0, what: str = "") -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


LOSS_LINE = """() => {
  const div = document.getElementById('sd-chart-loss');
  if (!div || !div.data) return null;
  const t = div.data.find(d => d.meta && d.meta.key === 'train/loss|0' && d.meta.run === 'live');
  return t ? {n: t.x.length, last: t.x[t.x.length - 1], finite: t.y.every(v => Number.isFinite(v))} : null;
}"""


@pytest.fixture
def live(tmp_path):
    run, stop = tmp_path / "runs" / "live", tmp_path / "stop"
    _finished_run(tmp_path / "runs" / "baseline")
    env = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "tests.serve.live_run", str(run), str(tmp_path / "ck"), str(stop)],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    server = Server(App([run, tmp_path / "runs" / "baseline"], poll_ms=300))
    server.start()
    try:
        _wait(lambda: (run / "rank-00000.sqlite").exists() or proc.poll() is not None, what="the run to start")
        yield server, run, proc
    finally:
        stop.touch()
        server.shutdown()
        server.server_close()
        try:
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()


def test_live_page_draws_updates_explains_and_compares(live, tmp_path):
    from playwright.sync_api import sync_playwright

    server, run, proc = live
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(server.url + "#run=live")

            # The charts have data, and the loss line grows as the run advances (polled, appended).
            page.wait_for_function(f"({LOSS_LINE})() && ({LOSS_LINE})().n > 5", timeout=60_000)
            first = page.evaluate(LOSS_LINE)
            assert first["finite"]
            page.wait_for_function(f"({LOSS_LINE})().last > {first['last'] + 20}", timeout=60_000)
            later = page.evaluate(LOSS_LINE)
            assert later["n"] > first["n"] and later["last"] > first["last"]
            charts = page.eval_on_selector_all("#sd-charts .st-chart", "els => els.map(e => e.dataset.chart)")
            assert {"loss", "grad_norm", "lr", "throughput", "step_time", "memory"} <= set(charts)

            # The loss spike the run went through is listed; a click shows its causes and fixes.
            page.wait_for_selector("tr.sd-finding:has-text('loss_spike')", timeout=90_000)
            page.click("tr.sd-finding:has-text('loss_spike')")
            detail = page.locator("#sd-detail")
            detail.wait_for(state="visible")
            text = detail.inner_text()
            assert "loss_spike" in text and f"step {live_run.SPIKE}" in text
            assert "Probable causes" in text and "Fixes to try" in text
            assert len(page.locator("#sd-detail ol li").all()) >= 2  # real causes and fixes, not "none recorded"
            marked = page.evaluate("""() => document.getElementById('sd-chart-loss').layout.shapes
                .filter(s => s.x0 === %d && s.line && s.line.width === 3).length""" % live_run.SPIKE)
            assert marked == 1  # the clicked finding is drawn bold on the loss chart

            # Checkpoints and the rollback are on the timeline (and the page reloaded the rewritten steps).
            page.wait_for_selector("#sd-timeline tr.sd-rollback", timeout=90_000)
            assert page.locator("#sd-timeline tr.sd-checkpoint").count() >= 2

            # Compare: the finished run's loss is overlaid (dashed) and its numbers sit beside this run's.
            page.select_option("#sd-compare", "baseline")
            page.wait_for_selector("#sd-compare-summary")
            page.wait_for_function("""() => document.getElementById('sd-chart-loss').data
                .some(d => d.meta && d.meta.run === 'baseline' && d.x.length === 300 && d.line.dash === 'dash')""")
            assert "config lr" in page.inner_text("#sd-compare-summary")

            shot = page.screenshot(full_page=True)
            (tmp_path / "dashboard.png").write_bytes(shot)
            assert not errors, errors
        finally:
            browser.close()
    assert proc.poll() is None, "the training run ended before the page was checked"
    _assert_non_trivial(shot)


def _assert_non_trivial(png: bytes) -> None:
    """A screenshot of a drawn page: big, and many colours (a blank or error page has a handful)."""
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")
    assert img.width >= 1000 and img.height >= 1000
    colours = img.getcolors(maxcolors=1 << 20)
    assert colours is None or len(colours) > 200, f"only {len(colours)} colours"
    assert len(png) > 50_000
