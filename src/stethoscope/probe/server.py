"""The probe's HTTP server inside the training process: stdlib only, loopback by default, every request
authenticated by a random token (constant-time compare), bodies size-limited before they are read, and
nothing ever printed to the trainer's stdout/stderr.

Routes are an extensible table: `server.mount("/dashboard", handler)` serves another page from the same
server (longest prefix wins); a handler takes a `Request` and returns a `Reply`.
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from stethoscope.errors import UsageError
from stethoscope.probe.config import ProbeConfig, is_loopback

log = logging.getLogger(__name__)


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: bytes
    headers: Any

    def json(self) -> dict[str, Any]:
        """The body as a JSON object ({} when empty); a malformed body is a UsageError (400)."""
        if not self.body:
            return {}
        try:
            data = json.loads(self.body)
        except ValueError as exc:
            raise UsageError(f"the request body is not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise UsageError("the request body must be a JSON object")
        return data


@dataclass
class Reply:
    status: int = 200
    body: Any = field(default_factory=dict)
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode()
        return json.dumps(self.body, default=str).encode()


Handler = Callable[[Request], Reply]


class ProbeServer:
    """A ThreadingHTTPServer on a daemon thread. `token` is random unless given; `close()` is idempotent."""

    def __init__(self, config: ProbeConfig | None = None, token: str | None = None) -> None:
        self.config = config or ProbeConfig()
        if not self.config.allow_remote and not is_loopback(self.config.host):  # also when config was mutated
            raise ValueError(f"refusing to bind the probe server to {self.config.host!r}: not a loopback address")
        self.token = token or secrets.token_urlsafe(32)
        self.routes: dict[str, tuple[Handler, bool]] = {}
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def mount(self, prefix: str, handler: Handler, auth: bool = True) -> None:
        """Serve every path under `prefix` with `handler` (auth=False only for pages that hold no data)."""
        self.routes["/" + prefix.strip("/")] = (handler, auth)

    def start(self) -> ProbeServer:
        httpd = ThreadingHTTPServer((self.config.host, self.config.port), _RequestHandler)
        httpd.daemon_threads = True
        httpd.probe = self  # type: ignore[attr-defined]
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.25},
                                        name="stethoscope-probe", daemon=True)
        self._thread.start()
        return self

    @property
    def host(self) -> str:
        return self.config.host

    @property
    def port(self) -> int:
        return self._httpd.server_address[1] if self._httpd is not None else 0

    def close(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(5.0)

    # -- one request (on a server thread) ---------------------------------------------------------
    def route(self, path: str) -> tuple[Handler, bool] | None:
        best = None
        for prefix, target in self.routes.items():
            if path == prefix or path.startswith(prefix.rstrip("/") + "/") or prefix == "/":
                if best is None or len(prefix) > len(best[0]):
                    best = (prefix, target)
        return best[1] if best is not None else None

    def authorized(self, headers: Any, query: dict[str, str] | None = None) -> bool:
        """The token in `Authorization: Bearer`, `X-Stethoscope-Token`, or, for a browser on a mounted page,
        the `stethoscope_token` cookie or a `?token=` on the first visit; each compared in constant time."""
        given = headers.get("Authorization", "")
        offered = [given[7:] if given[:7].lower() == "bearer " else headers.get("X-Stethoscope-Token", "")]
        offered.append(_cookie(headers.get("Cookie", ""), TOKEN_COOKIE))
        offered.append((query or {}).get("token", ""))
        want = self.token.encode()
        return any([hmac.compare_digest(o.strip().encode(), want) for o in offered])  # all compared: no early exit


class _RequestHandler(BaseHTTPRequestHandler):
    server_version = "stethoscope-probe"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    timeout = 30  # a client that stops sending does not hold a thread forever

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._dispatch()

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch()

    def _dispatch(self) -> None:
        probe: ProbeServer = self.server.probe  # type: ignore[attr-defined]
        url = urlsplit(self.path)
        target = probe.route(url.path)
        if target is None:
            return self._send(Reply(404, {"error": f"no such endpoint: {url.path}"}), drain=True)
        handler, auth = target
        query = dict(parse_qsl(url.query))
        if auth and not probe.authorized(self.headers, query):
            return self._send(Reply(401, {"error": "a valid token is required (Authorization: Bearer TOKEN)"}),
                              drain=True)
        if self.headers.get("Transfer-Encoding"):
            return self._send(Reply(411, {"error": "send a Content-Length (no chunked bodies)"}), close=True)
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            return self._send(Reply(400, {"error": "bad Content-Length"}), close=True)
        if length < 0 or length > probe.config.max_request_bytes:
            return self._send(Reply(413, {"error": f"request body of {length} bytes exceeds the limit of "
                                                   f"{probe.config.max_request_bytes}"}), close=True)
        body = self.rfile.read(length) if length else b""
        req = Request(self.command, url.path, query, body, self.headers)
        self._send(_call(handler, req))

    def _send(self, reply: Reply, drain: bool = False, close: bool = False) -> None:
        if drain and not close:
            close = bool(self.headers.get("Content-Length")) or bool(self.headers.get("Transfer-Encoding"))
        data = reply.encode()
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        if reply.status == 401:
            self.send_header("WWW-Authenticate", 'Bearer realm="stethoscope"')
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # never write into the trainer's stderr (and never a request line that might carry a token)


TOKEN_COOKIE = "stethoscope_token"


def _cookie(header: str, name: str) -> str:
    """The value of cookie `name` in a Cookie header ('' when absent)."""
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return ""


def _call(handler: Handler, req: Request) -> Reply:
    try:
        return handler(req)
    except UsageError as exc:
        return Reply(400, {"error": str(exc)})
    except Exception as exc:  # noqa: BLE001 - a failing endpoint answers 500; the run goes on
        log.debug("stethoscope probe endpoint %s failed", req.path, exc_info=True)
        return Reply(500, {"error": f"{type(exc).__name__}: {exc}"})
