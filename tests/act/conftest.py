"""Real servers on 127.0.0.1 standing in for Slack, PagerDuty, a webhook and an SMTP relay."""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Endpoint:
    """An HTTP server that records every POST. mode: "ok" (200 `ok`, or 202 for PagerDuty's path),
    "500" (always 500), "hang" (reads the request, never answers until the test ends)."""

    mode: str = "ok"
    requests: list[dict[str, Any]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    server: Any = None

    def url(self, path: str = "/hook") -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}{path}"

    def bodies(self, path: str | None = None) -> list[Any]:
        return [r["json"] for r in self.requests if path is None or r["path"] == path]


def _handler(ep: Endpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            ep.requests.append({"path": self.path, "headers": dict(self.headers), "json": json.loads(body)})
            if ep.mode == "hang":
                ep.release.wait(30)
                return
            status, text = (500, b"internal error") if ep.mode == "500" else \
                ((202, b'{"status":"success","message":"Event processed"}') if "enqueue" in self.path else (200, b"ok"))
            self.send_response(status)
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # the client hung up on a hanging handler: expected


@pytest.fixture
def endpoint():
    """A factory: endpoint("ok" | "500" | "hang") -> a running Endpoint, stopped after the test."""
    started: list[Endpoint] = []

    def start(mode: str = "ok") -> Endpoint:
        ep = Endpoint(mode)
        ep.server = _Server(("127.0.0.1", 0), _handler(ep))
        threading.Thread(target=ep.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        started.append(ep)
        return ep

    yield start
    for ep in started:
        ep.release.set()
        ep.server.shutdown()
        ep.server.server_close()


@dataclass
class Mailbox:
    host: str
    port: int
    messages: list[Any] = field(default_factory=list)


@pytest.fixture
def smtp():
    """An aiosmtpd SMTP server on 127.0.0.1 that keeps every message (login accepted for user/secret-pw)."""
    pytest.importorskip("aiosmtpd")
    from email import message_from_bytes

    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    box = Mailbox("127.0.0.1", port)

    class Handler:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            box.messages.append((envelope.rcpt_tos, message_from_bytes(envelope.content)))
            return "250 OK"

    def auth(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
        ok = data.login == b"user" and data.password == b"secret-pw"
        return AuthResult(success=ok)

    controller = Controller(Handler(), hostname="127.0.0.1", port=port, authenticator=auth,
                            auth_require_tls=False)
    controller.start()
    yield box
    controller.stop()
