"""A thin HTTP server (stdlib, loopback only) in front of a handler with `handle(method, path, query)`."""

from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import urlsplit

log = logging.getLogger(__name__)


class Handler(Protocol):
    def handle(self, method: str, path: str, query: str) -> tuple[int, str, bytes]: ...


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, handler: Handler, host: str = "127.0.0.1", port: int = 0) -> None:
        self.app = handler
        super().__init__((host, port), _Request)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"

    def server_close(self) -> None:
        super().server_close()
        close = getattr(self.app, "close", None)
        if close is not None:
            close()

    def start(self) -> threading.Thread:
        """Serve on a daemon thread (tests, embedding); `shutdown()` then `server_close()` to stop."""
        thread = threading.Thread(target=self.serve_forever, name="stethoscope-dashboard", daemon=True)
        thread.start()
        return thread


class _Request(BaseHTTPRequestHandler):
    server: Server

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self._answer("GET")

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer("HEAD")

    def _answer(self, method: str) -> None:
        parts = urlsplit(self.path)
        try:
            status, ctype, body = self.server.app.handle(method, parts.path, parts.query)
        except Exception:  # noqa: BLE001 - one request's bug is a 500, never the end of the server
            log.exception("dashboard request %s failed", self.path)
            status, ctype, body = 500, "text/plain; charset=utf-8", b"internal error (see the server's log)"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store" if "json" in ctype else "max-age=300")
        self.end_headers()
        if method != "HEAD":
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the page went away mid-answer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        log.debug("%s " + format, self.address_string(), *args)
