"""One JSON POST with a timeout that another thread can cut short (stdlib `http.client` only)."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
from typing import Any
from urllib.parse import urlsplit

from stethoscope.act.channels.base import DeliveryError

_MAX_BODY = 64 * 1024


def check_url(url: object, key: str = "url") -> str:
    """The URL when it is http(s)://host...; ValueError naming `key` otherwise (no secret in the text)."""
    if not isinstance(url, str) or not url:
        raise ValueError(f"{key} must be a non-empty string")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{key} must be an http:// or https:// URL with a host")
    return url


def safe_target(url: str, keep_path: bool = True) -> str:
    """Where a URL goes, for people: scheme://host[:port][/path], without query, user or password."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    port = f":{parts.port}" if parts.port else ""
    path = parts.path if keep_path else ("/..." if parts.path not in ("", "/") else "")
    return f"{parts.scheme}://{host}{port}{path}"


class JsonPost:
    """POSTs JSON to one URL; `abort()` (from another thread) ends a request in flight."""

    def __init__(self, url: str, timeout: float, headers: dict[str, str] | None = None) -> None:
        self.url = url
        self.timeout = timeout
        self.headers = {"Content-Type": "application/json", "User-Agent": "stethoscope-alerts", **(headers or {})}
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()

    def post(self, body: Any) -> tuple[int, str]:
        """(status, response text) for a 2xx answer; DeliveryError otherwise."""
        parts = urlsplit(self.url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        if parts.scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                parts.hostname, parts.port, timeout=self.timeout, context=ssl.create_default_context())
        else:
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=self.timeout)
        with self._lock:
            self._conn = conn
        try:
            conn.request("POST", path, body=json.dumps(body).encode(), headers=self.headers)
            resp = conn.getresponse()
            text = resp.read(_MAX_BODY).decode("utf-8", errors="replace")
        except (TimeoutError, socket.timeout):
            raise DeliveryError(f"no answer within {self.timeout:g} s") from None
        except (OSError, http.client.HTTPException) as exc:
            raise DeliveryError(f"{type(exc).__name__}: {exc}") from None
        finally:
            with self._lock:
                self._conn = None
            conn.close()
        if not 200 <= resp.status < 300:
            retry = resp.status >= 500 or resp.status in (408, 429)
            said = f": {text[:200].strip()}" if text.strip() else ""
            raise DeliveryError(f"HTTP {resp.status} {resp.reason}{said}", retryable=retry)
        return resp.status, text

    def abort(self) -> None:
        with self._lock:
            sock = self._conn.sock if self._conn is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in recv; close() alone does not
            except OSError:
                pass
