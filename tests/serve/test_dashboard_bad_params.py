"""Bad query parameters of the dashboard's API get a 400 naming the parameter, an unknown API a 404, never a
500 (user-trial-4: `lo=inf` and `after=1e400` were 'internal error', `hi=1e23` a 422 'query refused')."""

from __future__ import annotations

import pytest

from stethoscope import Monitor
from stethoscope.serve.dashboard import App


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    with Monitor(root / "r", strict=True, serve=False) as mon:
        for s in range(20):
            mon.step(s, loss=3.0 - s / 20)
    return App([root / "r"])


@pytest.mark.parametrize("query", ["lo=inf", "after=1e400", "hi=99999999999999999999999", "points=-inf", "lo=abc"])
def test_a_bad_number_is_a_400_naming_it(app, query):
    status, _, body = app.handle("GET", "/api/curves", f"run=r&{query}")
    assert status == 400, body
    assert f"?{query.split('=')[0]}=" in body.decode()


def test_an_unknown_api_is_a_404_even_without_a_run(app):
    status, _, body = app.handle("GET", "/api/nosuch", "")
    assert status == 404 and b"api/curves" in body
    assert app.handle("GET", "/api/curves", "run=r&lo=-5&hi=5")[0] == 200
