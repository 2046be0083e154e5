from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest


@pytest.fixture(autouse=True)
def live_dir(tmp_path_factory, monkeypatch):
    """Every test registers its live processes in a private directory, not the user's."""
    d = tmp_path_factory.mktemp("live")
    monkeypatch.setenv("STETHOSCOPE_LIVE_DIR", str(d))
    return d


def http(address: str, path: str, token: str | None, body: bytes | dict | None = None,
         headers: dict | None = None) -> tuple[int, dict]:
    """One real HTTP request; (status, JSON body)."""
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    h = dict(headers or {})
    if token is not None:
        h["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(f"http://{address}{path}", data=data, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")
