"""The probe server's safety: token required (constant-time compare), eval off by default, read-only SQL,
size limits, loopback only unless asked, and the token never visible where it should not be."""

from __future__ import annotations

import logging
import os
import socket
import stat

import pytest

from stethoscope import Monitor
from stethoscope.probe import ProbeConfig, registry
from stethoscope.store.query import open_run
from stethoscope.store.schema import RANKED
from tests.probe.conftest import http

torch = pytest.importorskip("torch")


def _train(mon, steps=20):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    for step in range(steps):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        mon.step(step, loss=loss)


@pytest.fixture
def live(tmp_path):
    mon = Monitor(tmp_path / "run", strict=True)
    _train(mon)
    mon.flush()
    entry = registry.run_entries(mon.run_dir)[0]
    yield mon, entry
    mon.close()


def test_no_token_and_a_wrong_token_get_401_through_a_constant_time_compare(live, monkeypatch):
    _, e = live
    import stethoscope.probe.server as server

    calls = []
    real = server.hmac.compare_digest
    monkeypatch.setattr(server.hmac, "compare_digest", lambda a, b: calls.append((a, b)) or real(a, b))
    for path in ("/status", "/backtrace", "/query", "/eval", "/dump"):
        assert http(e.address, path, None)[0] == 401
        status, body = http(e.address, path, "not-the-token")
        assert status == 401 and "token" in body["error"]
    # header, cookie and ?token= are each compared (no early exit): 3 compares a request
    assert len(calls) == 30 and all(b == e.token.encode() for _, b in calls)
    assert http(e.address, "/status", e.token)[0] == 200
    assert http(e.address, "/nope", e.token)[0] == 404


def test_eval_is_refused_with_403_unless_allowed(live):
    _, e = live
    status, body = http(e.address, "/eval", e.token, {"code": "1 + 1"})
    assert status == 403 and "allow_eval=True" in body["error"] and "--allow-eval" in body["error"]


def test_sql_writes_attach_and_pragmas_are_refused_and_change_nothing(live, tmp_path):
    mon, e = live
    before = http(e.address, "/query", e.token, {"sql": "SELECT COUNT(*) FROM points"})[1]["rows"]
    victim = tmp_path / "other.db"
    for sql in ("DELETE FROM points", "INSERT INTO run VALUES ('x', 'y')", "DROP TABLE points",
                "UPDATE points SET value = 0", f"ATTACH DATABASE '{victim}' AS x", "PRAGMA query_only = OFF",
                "PRAGMA journal_mode", "CREATE TABLE t (x)", "SELECT 1; DELETE FROM points",
                "DELETE FROM backtrace", "VACUUM"):
        for engine in ("auto", "sqlite", "duckdb"):
            status, body = http(e.address, "/query", e.token, {"sql": sql, "engine": engine})
            assert status == 400 and ("refused" in body["error"] or engine == "duckdb" and "failed" in body["error"]), \
                (sql, engine, body)
    assert not victim.exists()
    assert http(e.address, "/query", e.token, {"sql": "SELECT COUNT(*) FROM points"})[1]["rows"] == before
    with open_run(mon.run_dir) as r:
        assert r.query("SELECT COUNT(*) FROM points")[1][0][0] == before[0][0]


def test_an_oversized_request_gets_413_before_its_body_is_read(live):
    _, e = live
    for length in (ProbeConfig().max_request_bytes + 1, 1 << 40):  # declared; the body is never sent
        with socket.create_connection((e.host, e.port), timeout=10) as s:
            s.sendall(f"POST /query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {e.token}\r\n"
                      f"Content-Length: {length}\r\n\r\n".encode() + b'{"sql": "')
            answer = b""
            while chunk := s.recv(4096):  # the server closes the connection after its answer
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 413") and b"exceeds the limit" in answer
    assert http(e.address, "/query", e.token, {"sql": "SELECT 1"})[0] == 200  # still serving


def test_a_non_loopback_bind_is_refused_without_the_flag(tmp_path):
    with pytest.raises(ValueError, match="not a loopback address"):
        ProbeConfig(host="0.0.0.0")
    with pytest.raises(ValueError, match="not a loopback address"):
        Monitor(tmp_path / "r", serve=ProbeConfig(host="10.1.2.3"))
    with Monitor(tmp_path / "r2", serve=ProbeConfig(host="0.0.0.0", allow_remote=True)) as mon:
        e = registry.run_entries(mon.run_dir)[0]
        assert e.host == "0.0.0.0"
        assert http(f"127.0.0.1:{e.port}", "/status", None)[0] == 401  # still needs the token


def test_the_token_never_shows_in_sql_status_logs_or_output(tmp_path, caplog, capfd):
    caplog.set_level(logging.DEBUG)
    with Monitor(tmp_path / "run", strict=True, serve=ProbeConfig(allow_eval=True)) as mon:
        _train(mon)
        mon.flush()
        e = registry.run_entries(mon.run_dir)[0]
        token = e.token
        seen = [http(e.address, "/status", token)[1], http(e.address, "/backtrace?locals=1", token)[1],
                http(e.address, "/dump", token, {})[1]]
        for table in [*RANKED, "backtrace", "trace"]:
            seen.append(http(e.address, "/query", token, {"sql": f"SELECT * FROM {table}"})[1])
        ev = http(e.address, "/eval", token, {"code": "import os; sorted(os.environ)"})[1]
        seen.append(ev)
        for entry in [e, *registry.live_entries()]:
            assert token not in str(entry.public())
        for path in [*mon.run_dir.glob("probe-rank-*.json"), *registry.live_dir().glob("*.json")]:
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path
        assert stat.S_IMODE(os.stat(registry.live_dir()).st_mode) == 0o700
    assert all(token not in str(s) for s in seen)
    assert ev["error"] is None and "STETHOSCOPE_LIVE_DIR" in ev["value"]  # the eval really ran
    assert token not in caplog.text
    out, err = capfd.readouterr()
    assert token not in out and token not in err
    stored = b"".join(p.read_bytes() for p in mon.run_dir.iterdir() if p.is_file() and "probe-rank" not in p.name)
    assert token.encode() not in stored
    assert not list(mon.run_dir.glob("probe-rank-*.json")) and not list(registry.live_dir().glob("*.json"))


def test_other_pages_mount_on_the_same_server_behind_the_same_token():
    from stethoscope.probe.server import ProbeServer, Reply

    server = ProbeServer().start()
    try:
        server.mount("/dashboard", lambda req: Reply(200, f"<p>{req.path}</p>", "text/html"))
        server.mount("/dashboard/api", lambda req: Reply(200, {"api": req.query}))
        address = f"{server.host}:{server.port}"
        assert http(address, "/dashboard/x", None)[0] == 401
        assert http(address, "/dashboard/api/runs?rank=1", server.token) == (200, {"api": {"rank": "1"}})
        import urllib.request

        req = urllib.request.Request(f"http://{address}/dashboard/x", headers={"Authorization": f"Bearer {server.token}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.read() == b"<p>/dashboard/x</p>" and r.headers["Content-Type"] == "text/html"
    finally:
        server.close()


def test_the_dashboard_is_served_from_the_live_probe_behind_its_token(live):
    """`/dashboard/?token=…` answers the page and keeps the token in an HttpOnly cookie; the page's own
    requests then carry the cookie; without the token: 401."""
    import http.client

    mon, e = live
    host, port = e.address.rsplit(":", 1)

    def get(path, headers=None):
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        conn.request("GET", path, headers=headers or {})
        r = conn.getresponse()
        out = r.status, dict(r.getheaders()), r.read()
        conn.close()
        return out

    assert get("/dashboard/")[0] == 401
    assert get("/dashboard/?token=wrong")[0] == 401
    status, headers, _ = get(f"/dashboard?token={e.token}")
    assert status == 302 and headers["Location"] == f"/dashboard/?token={e.token}"
    status, headers, page = get(f"/dashboard/?token={e.token}")
    assert status == 200 and b"plotly" in page.lower() and headers["Content-Type"].startswith("text/html")
    cookie = headers["Set-Cookie"]
    assert cookie.startswith(f"stethoscope_token={e.token};") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    status, _, body = get("/dashboard/api/runs", {"Cookie": f"stethoscope_token={e.token}"})
    assert status == 200 and str(mon.run_dir.name).encode() in body
    assert get("/dashboard/api/runs", {"Cookie": "stethoscope_token=wrong"})[0] == 401


def test_probe_dashboard_prints_the_address_of_the_live_page(live):
    from click.testing import CliRunner

    from stethoscope.cli.main import cli

    mon, e = live
    res = CliRunner().invoke(cli, ["probe", str(mon.run_dir), "dashboard"])
    assert res.exit_code == 0 and res.output.strip() == f"http://{e.address}/dashboard/?token={e.token}"
