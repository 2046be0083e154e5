"""The dashboard as a transport-free handler: `App.handle(method, path, query) -> (status, type, body)`.

`stethoscope dashboard` serves it with `serve.http`; the live probe server can mount the same object
under a prefix (the page asks for everything by relative URL). Routes:

    GET /                      the page (static/dashboard.js draws it with plotly)
    GET /static/plotly.min.js  plotly.js from the installed plotly package (no CDN: works offline)
    GET /static/<file>         the page's own script and styles
    GET /api/runs              the runs: status, ranks, last step, findings by severity
    GET /api/curves?run=R[&points=N&lo=S&hi=S]  every chart's lines, each thinned to N points (min/max per bucket)
    GET /api/curves?run=R&after=S               only the points after step S (what the page polls for)
    GET /api/events?run=R      findings (with causes and fixes), alerts, checkpoints and rollbacks
    GET /api/summary?run=R     the numbers `stethoscope show` prints, and the run's config (for compare)

A run is named by the key `/api/runs` gives; no other path on disk is ever read.
"""

from __future__ import annotations

import importlib.util
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import orjson

from stethoscope.report.html import PALETTE
from stethoscope.report.template import CSS, SEVERITY_COLORS
from stethoscope.errors import StethoscopeError
from stethoscope.records import SEVERITIES, Finding
from stethoscope.serve import data
from stethoscope.store.query import MAX_ATTACHED, RunReader, open_run, rank_files

Response = tuple[int, str, bytes]
Query = Mapping[str, Sequence[str]] | str
STATIC = Path(__file__).resolve().parent / "static"
_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
          ".html": "text/html; charset=utf-8"}
JSON = "application/json"
SNAPSHOT_S = 10.0  # how long the copy of a run of more than 10 ranks is shown before it is taken again


def plotly_js_path() -> Path:
    """plotly.min.js as shipped inside the installed plotly package (found without importing plotly)."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise StethoscopeError("plotly is not installed (pip install plotly): the dashboard draws its charts with it")
    return Path(list(spec.submodule_search_locations)[0]) / "package_data" / "plotly.min.js"


class App:
    """The dashboard over a set of runs: `runs` (paths), or a callable listing them anew on each request."""

    def __init__(self, runs: Iterable[str | os.PathLike[str]] | Callable[[], Iterable[Path]],
                 poll_ms: int = 2000) -> None:
        self._list = runs if callable(runs) else (lambda paths=[Path(p) for p in runs]: paths)
        self.poll_ms = poll_ms
        self._lock = threading.Lock()
        # run key -> (what the findings were computed from, the findings, not computed again before this time)
        self._findings: dict[str, tuple[Any, list[Finding], float]] = {}
        self._static: dict[str, bytes] = {}
        self._shared: dict[str, _Shared] = {}

    # -- the one entry point --------------------------------------------------------------------
    def handle(self, method: str, path: str, query: Query = "") -> Response:
        if method not in ("GET", "HEAD"):
            return _text(405, "only GET is served")
        q = parse_qs(query) if isinstance(query, str) else query
        route = path.lstrip("/")
        try:
            if route in ("", "index.html"):
                return 200, _TYPES[".html"], self._page()
            if route == "favicon.ico":
                return 204, "image/x-icon", b""
            if route.startswith("static/"):
                return self._file(route.removeprefix("static/"))
            if route.startswith("api/"):
                return 200, JSON, orjson.dumps(self._api(route.removeprefix("api/"), q),
                                               option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)
        except _NotFound as exc:
            return _text(404, str(exc))
        except _BadRequest as exc:
            return _text(400, str(exc))
        except StethoscopeError as exc:
            return _text(422, str(exc))
        return _text(404, f"no such page: /{route}")

    def _api(self, name: str, q: Mapping[str, Sequence[str]]) -> Any:
        if name == "runs":
            return {"runs": [self._listed(key, path) for key, path in self.runs().items()], "poll_ms": self.poll_ms,
                    "style": {"palette": PALETTE, "severity_colors": SEVERITY_COLORS}}
        if name not in ("curves", "events", "summary"):
            raise _NotFound(f"no such API: /api/{name} (api/runs, api/curves, api/events, api/summary)")
        key = _one(q, "run")
        with self._open(key) as reader:
            if name == "curves":
                after = _int(q, "after")
                if after is not None:
                    return {"run": key, **data.newer(reader, after, _int(q, "points") or data.MAX_POINTS)}
                points = min(max(_int(q, "points") or data.MAX_POINTS, 16), 20_000)
                return {"run": key, **data.curves(reader, points, _int(q, "lo"), _int(q, "hi"))}
            if name == "events":
                found = self.findings(key, reader)
                keyed = zip(found, data.finding_keys(found))
                return {"run": key, "findings": [data.finding_json(f, k) for f, k in keyed],
                        "alerts": data.alerts(reader), "timeline": data.timeline(reader)}
            if name == "summary":
                return {"run": key, **_summary(reader)}
        raise _NotFound(f"no such API: /api/{name}")

    # -- runs -----------------------------------------------------------------------------------
    def runs(self) -> dict[str, Path]:
        """key -> run directory, keys unique (the directory name, with its parent when two share it)."""
        paths = [Path(p) for p in self._list()]
        names = [p.name for p in paths]
        return {(p.name if names.count(p.name) == 1 else f"{p.parent.name}/{p.name}"): p for p in paths}

    def _open(self, key: str) -> AbstractContextManager[RunReader]:
        path = self.runs().get(key)
        if path is None:
            raise _NotFound(f"no run {key!r} here (see /api/runs)")
        return self._reader(key, path)

    @contextmanager
    def _reader(self, key: str, path: Path) -> Iterator[RunReader]:
        """A reader per request (opening a run of up to 10 ranks reads nothing: live, and cheap); a run with
        more ranks is copied when opened (store/query.py), so its copy is kept and taken again for
        SNAPSHOT_S seconds, one request at a time."""
        if len(rank_files(path)) <= MAX_ATTACHED:
            with open_run(path) as reader:
                yield reader
            return
        with self._lock:
            shared = self._shared.setdefault(key, _Shared())
        with shared.lock:
            if shared.reader is None or time.monotonic() - shared.opened > SNAPSHOT_S:
                if shared.reader is not None:
                    shared.reader.close()
                shared.reader, shared.opened = open_run(path), time.monotonic()
            yield shared.reader

    def close(self) -> None:
        """Close the kept copies of many-rank runs."""
        with self._lock:
            kept, self._shared = list(self._shared.values()), {}
        for shared in kept:
            with shared.lock:
                if shared.reader is not None:
                    shared.reader.close()
                    shared.reader = None

    def _listed(self, key: str, path: Path) -> dict[str, Any]:
        try:
            with self._reader(key, path) as reader:
                found = self.findings(key, reader)
                return {"key": key, "path": str(path), **_light_summary(reader),
                        "findings": {sev: sum(f.severity == sev for f in found) for sev in SEVERITIES}}
        except StethoscopeError as exc:
            return {"key": key, "path": str(path), "status": f"unreadable: {exc}"}

    def findings(self, key: str, reader: RunReader) -> list[Finding]:
        """The run's incidents as every view shows them (`diagnose.stored.run_incidents`), computed again when
        the run has moved on (new findings, steps or status), at most once per ten times the last computation
        took; an imported log's once (it does not change); a run replaced in place (another `t0`) at once."""
        from stethoscope.diagnose.stored import run_incidents

        meta = reader.meta()
        _, rows = reader.query("SELECT COUNT(*), MAX(id) FROM findings")
        # t0 (when the store was made): a run replaced in place (`demo --force`, an import again) is another run
        basis = (meta.get("t0"),) + (("imported",) if meta.get("source_format") else
                                     (*rows[0], data.last_step(reader), meta.get("status")))
        with self._lock:
            cached = self._findings.get(key)
        if cached is not None and (cached[0] == basis or (cached[0][0] == basis[0] and time.monotonic() < cached[2])):
            return cached[1]
        t0 = time.monotonic()
        found = run_incidents(reader).findings
        with self._lock:
            self._findings[key] = (basis, found, time.monotonic() + 9 * (time.monotonic() - t0))
        return found

    # -- files ----------------------------------------------------------------------------------
    def _page(self) -> bytes:
        return self._static_bytes("dashboard.html").replace(b"{{POLL_MS}}", str(int(self.poll_ms)).encode())

    def _file(self, name: str) -> Response:
        if name == "plotly.min.js":
            return 200, _TYPES[".js"], self._static_bytes(name)
        if name == "style.css":  # the report's styles, then the dashboard's own
            return 200, _TYPES[".css"], CSS.encode() + self._static_bytes("dashboard.css")
        if "/" in name or name.startswith(".") or not (STATIC / name).is_file():
            raise _NotFound(f"no such file: static/{name}")
        return 200, _TYPES.get(Path(name).suffix, "application/octet-stream"), self._static_bytes(name)

    def _static_bytes(self, name: str) -> bytes:
        body = self._static.get(name)
        if body is None:
            path = plotly_js_path() if name == "plotly.min.js" else STATIC / name
            body = path.read_bytes()
            self._static[name] = body
        return body


@dataclass
class _Shared:
    """The kept copy of a many-rank run."""

    reader: RunReader | None = None
    opened: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)


class _NotFound(StethoscopeError):
    pass


class _BadRequest(StethoscopeError):
    pass


def _text(status: int, message: str) -> Response:
    return status, "text/plain; charset=utf-8", message.encode()


def _one(q: Mapping[str, Sequence[str]], name: str) -> str:
    values = q.get(name) or []
    if not values:
        raise _BadRequest(f"missing ?{name}=")
    return values[0]


def _int(q: Mapping[str, Sequence[str]], name: str) -> int | None:
    values = q.get(name) or []
    if not values or values[0] == "":
        return None
    try:
        value = int(float(values[0]))
    except (ValueError, OverflowError):  # 'abc', 'nan'; 'inf', '1e400'
        raise _BadRequest(f"?{name}= must be a number, got {values[0]!r}") from None
    if abs(value) >= 2**63:  # a step SQLite cannot hold: a bad request, not a refused query or a 500
        raise _BadRequest(f"?{name}= must be a step between -2**63 and 2**63, got {values[0]!r}")
    return value


def _light_summary(reader: RunReader) -> dict[str, Any]:
    """The runs list's row but its findings: cheap on any size of run (one primary-key probe per series)."""
    meta = reader.meta()
    status = _meta_value(meta.get("status"))
    return {"status": status if isinstance(status, str) else "", "ranks": len(reader.ranks),
            "last_step": data.last_step(reader), "name": reader.path.name}


def _meta_value(raw: str | None) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return raw


def _summary(reader: RunReader) -> dict[str, Any]:
    from stethoscope.report.html import flatten

    config = {}
    meta = reader.meta()
    for key in ("config", "hparams"):
        value = _meta_value(meta.get(key))
        if isinstance(value, dict):
            config.update(flatten(value, f"{key}." if key == "hparams" else ""))
    status = _meta_value(meta.get("status"))
    return {"summary": {"status": status, **data.outcomes(reader)}, "config": config}
