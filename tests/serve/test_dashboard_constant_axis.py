"""The dashboard draws a constant line at its value (user-trial-2: a fixed LR of 0.003 sat on plotly's default
-1..1 axis, where it reads as an LR of 0), in a real headless Chromium on the real HTTP server."""

from __future__ import annotations

import math
import shutil

import pytest

from stethoscope import Monitor
from stethoscope.serve.dashboard import App
from stethoscope.serve.http import Server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install chromium)")

RANGE = """id => { const d = document.getElementById('sd-chart-' + id);
  return d && d._fullLayout && d.data && d.data.length ? d._fullLayout.yaxis.range : null; }"""


def test_a_constant_lr_is_drawn_around_its_value(tmp_path):
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    with Monitor(tmp_path / "runs" / "fixed", serve=False) as mon:
        for s in range(100):
            mon.step(s, loss=3.0 * math.exp(-s / 30) + 0.4, **{"opt/lr": 0.003})
    server = Server(App([tmp_path / "runs" / "fixed"], poll_ms=300))
    server.start()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                errors: list[str] = []
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.goto(server.url + "#run=fixed")
                page.wait_for_function(f"({RANGE})('lr') && ({RANGE})('loss')", timeout=60_000)
                low, high = page.evaluate(f"({RANGE})('lr')")
                assert 0 < low < 0.003 < high < 0.01  # was [-0.997, 1.003]: the line at "0"
                loss_low, loss_high = page.evaluate(f"({RANGE})('loss')")
                assert loss_low < 0.5 and loss_high > 3.0  # a moving line keeps plotly's autorange
                assert errors == []
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()
