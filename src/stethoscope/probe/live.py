"""The probe inside a live training process: the server with its endpoints, the registry entries, the
hang watchdog, the cross-rank health gather and the opt-in module trace, composed in one object.

The Monitor starts one (`serve=True`, the default) and calls `on_step(step)` once per step (O(1) but for
the health gather every N steps); `stethoscope run` / `STETHOSCOPE=1` start one before the user's script
and a Monitor created later adopts it. Nothing here raises into training: failures are counted in
`errors` and logged once (re-raised only when `strict`).
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import io
import logging
import os
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from stethoscope.detect.throughput import HANG_SERIES as HANG_POINT  # named where the detectors read it
from stethoscope.errors import InternalError, QueryRefused, UsageError
from stethoscope.findings.catalogue import HANG
from stethoscope.probe import registry, stacks
from stethoscope.probe.config import ProbeConfig
from stethoscope.probe.server import TOKEN_COOKIE, ProbeServer, Reply, Request
from stethoscope.probe.sql import LiveSQL
from stethoscope.records import Finding

log = logging.getLogger(__name__)

EVAL_DISABLED = ("eval is disabled in this process; start it with eval allowed: Monitor(..., serve=ProbeConfig("
                 "allow_eval=True)) or `stethoscope run --allow-eval -- python train.py`")
_current: LiveProbe | None = None
_current_lock = threading.Lock()


class LiveProbe:
    def __init__(self, config: ProbeConfig | None = None, *, run_dir: str | os.PathLike[str] | None = None,
                 rank: int = 0, world_size: int = 1, strict: bool = False) -> None:
        self.config = config or ProbeConfig()
        self.run_dir = Path(run_dir) if run_dir else None
        self.rank, self.world_size = rank, world_size
        self.strict = strict
        self.gpu: Any = None  # the Monitor's GPU-health sampler (capture/gpu.GpuHealth), set by the Monitor
        self.errors = 0
        self.started = time.time()
        self.step: int | None = None
        self.steps = 0
        self.last_finding: Finding | None = None
        self.recorder: Any = None
        self.watchdog: Any = None
        self.health: Any = None
        self.tracer: Any = None
        self.inbox: FindingInbox | None = None
        self._owner: Any = None
        self._times: deque[float] = deque(maxlen=200)
        self._last_t: float | None = None
        self._fwd_t0: float | None = None
        self._fwd_s = 0.0
        self._data_s: float | None = None
        self._fwd_end: float | None = None
        self._bwd_s: float | None = None  # the last forward's end to the optimizer step: backward + its all-reduce
        self._hooks: list[Any] = []
        self._closed = False
        self._adopted = False
        self._model: Any = None
        self.server = ProbeServer(self.config)
        self._dashboard_app: Any = None
        for path, handler in (("/status", self._status), ("/backtrace", self._backtrace), ("/query", self._query),
                              ("/eval", self._eval), ("/dump", self._dump), ("/dashboard", self._dashboard)):
            self.server.mount(path, handler)
        self.server.start()
        self.sql = LiveSQL(self._store_path(), self._live_rows, self.config.query_timeout_s, rank=self.rank)
        self._registered: list[Path] = []
        self._register()

    # -- wiring ---------------------------------------------------------------------------------
    def _register(self) -> None:
        registry.unregister(self._registered)
        entry = registry.Entry(os.getpid(), self.server.host, self.server.port, self.server.token, self.rank,
                               self.world_size, str(self.run_dir.resolve()) if self.run_dir else "", self.started,
                               " ".join(sys.argv)[:500])
        self._registered = registry.register(entry)

    def _store_path(self) -> Path | None:
        """This rank's own store (`probe --all` merges the ranks): never every rank file of a big run per probe."""
        from stethoscope.store.db import rank_path

        return rank_path(self.run_dir, self.rank) if self.run_dir is not None else None

    def refresh_registration(self) -> None:
        """Rewrite the registry entries (after sys.argv changed)."""
        self._register()

    def attach(self, owner: Any, *, run_dir: str | os.PathLike[str], rank: int, world_size: int, recorder: Any,
               model: Any = None) -> None:
        """Bind to a Monitor: its store for query/dump, its steps for the watchdog, health and trace."""
        self._owner, self.recorder = owner, recorder
        self.run_dir, self.rank, self.world_size = Path(run_dir), rank, world_size
        self.sql.close()
        self.sql = LiveSQL(self._store_path(), self._live_rows, self.config.query_timeout_s, rank=self.rank)
        self._register()
        if self.config.watchdog and self.watchdog is None:
            from stethoscope.probe.watchdog import Watchdog

            self.watchdog = Watchdog(self.config, rank, self.emit, self._store_stacks, self.run_dir)
        self._start_health()
        self._model = model
        if model is not None and hasattr(model, "register_forward_pre_hook") and (self.health or self.watchdog):
            self._hooks = [model.register_forward_pre_hook(self._on_forward),
                           model.register_forward_hook(self._after_forward)]
            if self.health is not None:
                from stethoscope.probe.health import optimizer_step_hook

                self._hooks.append(optimizer_step_hook(self._on_optimizer))
        if self.config.trace_every and model is not None:
            from stethoscope.probe.trace import ModuleTrace

            self.tracer = ModuleTrace(model, self.config.trace_every)

    def _start_health(self) -> None:
        from stethoscope.probe.health import Health, distributed_world

        world = distributed_world() if self.config.health_every else None
        if world is not None:
            self.health = Health(self.config, *world)

    def finding_stage(self) -> FindingInbox:
        """A stage of the Monitor's observer chain (capture/observers.py), after the detectors: this probe's
        findings join their stream there (so they reach the alert rules and the store like any detector's)."""
        self.inbox = FindingInbox(self)
        return self.inbox

    def detach(self, owner: Any) -> None:
        """The Monitor is closing: stop what watched its steps; a server started before it stays up."""
        if owner is not self._owner:
            return
        self._stop_watching()
        self._owner = self.recorder = self.inbox = None
        if not getattr(self, "_adopted", False):
            self.close()

    # -- the training thread --------------------------------------------------------------------
    def on_step(self, step: int) -> None:
        try:
            now = time.perf_counter()
            dt = now - self._last_t if self._last_t is not None else None
            self._last_t = now
            self.step, self.steps = step, self.steps + 1
            self._times.append(now)
            if self.watchdog is not None:
                self.watchdog.beat(step)
            if self.health is not None:
                self.health.add(dt, self._fwd_s, self._data_s, self._bwd_s)
                self._fwd_s, self._data_s, self._fwd_end, self._bwd_s = 0.0, None, None, None
                # by calls, not step numbers: ranks out of step still pair up; only when every rank has a Monitor
                if self.health.due(self.steps) and self.health.ready():
                    self._gather(step)
            if self.tracer is not None:
                rows = self.tracer.on_step(step)
                if rows and self.recorder is not None:
                    self.recorder.call("write_trace", rows)
        except Exception as exc:  # noqa: BLE001 - never crash the run
            self._fail(exc, "watching a step")

    def _gather(self, step: int) -> None:
        code = 0.0
        if self.last_finding is not None:
            from stethoscope.detect.straggler import finding_code

            code = finding_code(self.last_finding.type)
        gpu = getattr(self, "gpu", None)  # the Monitor's NVML sampler (capture/gpu.py), when it has one
        for f in self.health.gather(step, _memory_gib(), code, gpu.last if gpu is not None else None):
            self.emit(f)

    def _on_forward(self, *_: Any) -> None:
        now = time.perf_counter()
        if self.watchdog is not None and not self._model.training:
            self.watchdog.touch()  # an eval between steps is progress, not a hang
        if self._data_s is None and self._last_t is not None:
            self._data_s = now - self._last_t
        self._fwd_t0 = now

    def _after_forward(self, *_: Any) -> None:
        if self._fwd_t0 is not None:
            self._fwd_end = time.perf_counter()
            self._fwd_s += self._fwd_end - self._fwd_t0
            self._fwd_t0 = None

    def _on_optimizer(self, *_: Any) -> None:
        if self._bwd_s is None and self._fwd_end is not None:
            self._bwd_s = time.perf_counter() - self._fwd_end

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The watchdog does not count the time inside (checkpoint saves, evals)."""
        if self.watchdog is None:
            yield
            return
        with self.watchdog.paused():
            yield

    # -- findings and stacks (any thread) -------------------------------------------------------
    def emit(self, finding: Finding) -> None:
        self.last_finding = finding
        rec = self.recorder
        if rec is None:
            return
        if self.inbox is not None:
            self.inbox.put(finding)
            step = finding.step if finding.step is not None else 0
            stalled = float(finding.evidence.get("stalled_s", 0.0)) if finding.type == HANG else 0.0
            rec.put_point(HANG_POINT, step, 0.0 if finding.end_step is not None else stalled, time.time())
            rec.queue.wake.set()  # the writer hands the finding to the rules now, not at its next interval
        else:
            rec.call("write_findings", [finding], time.time())

    def _store_stacks(self, threads: list[dict[str, Any]], snapshot_id: int) -> None:
        if self.recorder is not None:
            self.recorder.call("write_stacks", stacks.rows(threads, snapshot_id))

    def _live_rows(self, name: str) -> list[tuple[Any, ...]]:
        if name == "backtrace":
            return [(self.rank, th["thread"], int(th["main"]), depth, f["function"], f["file"], f["line"], f["code"])
                    for th in stacks.snapshot() for depth, f in enumerate(reversed(th["frames"]))]
        if name == "trace" and self.tracer is not None:
            return [(self.rank, *row) for row in list(self.tracer.samples)]
        return []

    # -- endpoints (server threads) -------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        times = list(self._times)
        rate = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else None
        f = self.last_finding
        out: dict[str, Any] = {
            "pid": os.getpid(), "rank": self.rank, "world_size": self.world_size,
            "run_dir": str(self.run_dir) if self.run_dir else None, "step": self.step, "steps": self.steps,
            "steps_per_s": rate, "uptime_s": round(time.time() - self.started, 3),
            "since_last_step_s": round(time.perf_counter() - self._last_t, 3) if self._last_t is not None else None,
            "last_finding": None if f is None else {"type": f.type, "severity": f.severity, "step": f.step,
                                                     "message": f.message},
            "hang": dict(self.watchdog.hang) if self.watchdog is not None and self.watchdog.hang else None,
            "hang_timeout_s": round(self.watchdog.timeout(), 3) if self.watchdog is not None else None,
            "health": self.health.table if self.health is not None else None,
            "allow_eval": self.config.allow_eval, "threads": threading.active_count(),
            "python": sys.version.split()[0], "argv": sys.argv[:20], "errors": self.errors,
        }
        return out

    def _status(self, _req: Request) -> Reply:
        return Reply(200, self.status())

    def _backtrace(self, req: Request) -> Reply:
        with_locals = req.query.get("locals", "") in ("1", "true", "yes") or bool(req.json().get("locals"))
        threads = stacks.snapshot(with_locals, self.config.locals_max_chars, redact=(self.server.token,))
        return Reply(200, {"rank": self.rank, "pid": os.getpid(), "step": self.step, "threads": threads})

    def _query(self, req: Request) -> Reply:
        sql = req.json().get("sql") or req.query.get("sql", "")
        engine = req.json().get("engine") or req.query.get("engine", "auto")
        try:
            result = self.sql.query(sql, engine)
        except QueryRefused as exc:
            return Reply(400, {"error": str(exc)})
        return Reply(200, dict(result, rank=self.rank))

    def _eval(self, req: Request) -> Reply:
        if not self.config.allow_eval:
            return Reply(403, {"error": EVAL_DISABLED})
        code = req.json().get("code")
        if not isinstance(code, str) or not code.strip():
            raise UsageError("no code given")
        return Reply(200, dict(run_code(code, {"probe": self, "monitor": self._owner}), rank=self.rank))

    def _dashboard(self, req: Request) -> Reply:
        """`stethoscope dashboard`'s page of this run, from this process: `/dashboard/?token=…` (what
        `stethoscope probe TARGET dashboard` prints) keeps the token in an HttpOnly cookie for the page's
        own requests. The page's code loads on the first request, never with the training process."""
        from urllib.parse import urlencode

        if self.run_dir is None:
            return Reply(404, {"error": "this process records no run: there is no dashboard to show"})
        sub = req.path[len("/dashboard"):]
        if not sub:  # the page's URLs are relative to the folder
            query = f"?{urlencode(req.query)}" if req.query else ""
            return Reply(302, b"", "text/plain", {"Location": f"/dashboard/{query}"})
        if self._dashboard_app is None:
            from stethoscope.serve.dashboard import App  # the one upward import: tests/test_layering.py

            self._dashboard_app = App([self.run_dir])
        headers = {}
        if "token" in req.query:
            headers["Set-Cookie"] = f"{TOKEN_COOKIE}={req.query['token']}; HttpOnly; SameSite=Strict; Path=/"
        query = urlencode({k: v for k, v in req.query.items() if k != "token"})
        status, content_type, body = self._dashboard_app.handle(req.method, sub, query)
        return Reply(status, body, content_type, headers)

    def _dump(self, _req: Request) -> Reply:
        threads = stacks.snapshot()
        snapshot_id = time.time_ns() // 1000
        status = self.status()
        if self.recorder is None:
            if self.run_dir is None:
                return Reply(409, {"error": "no store to dump into: this process has no Monitor and no run directory"})
            path = self.run_dir / f"probe-dump-rank-{self.rank:05d}-{snapshot_id}.json"
            registry.write_private(path, {"status": status, "threads": threads})
            return Reply(200, {"rank": self.rank, "snapshot": snapshot_id, "threads": len(threads), "file": str(path)})
        self._store_stacks(threads, snapshot_id)
        self.recorder.call("write_events", [(self.step, time.time(), "lifecycle", "info", "probe",
                                             f"probe dump: {len(threads)} threads (stacks snapshot {snapshot_id})",
                                             {"snapshot": snapshot_id, "status": status})])
        durable = self.recorder.flush(10.0)
        return Reply(200, {"rank": self.rank, "snapshot": snapshot_id, "threads": len(threads), "durable": durable,
                           "store": str(self.run_dir)})

    # -- the end --------------------------------------------------------------------------------
    def _stop_watching(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks = []
        for part in (self.watchdog, self.health, self.tracer):
            if part is not None:
                part.close()
        self.watchdog = self.health = self.tracer = None

    def close(self) -> None:
        """Stop the server and every thread, remove the registry entries. Idempotent; never raises."""
        global _current
        if self._closed:
            return
        self._closed = True
        for step in (self._stop_watching, self.server.close, self.sql.close,
                     lambda: registry.unregister(self._registered)):
            try:
                step()
            except Exception as exc:  # noqa: BLE001
                self._fail(exc, "closing the probe")
        with _current_lock:
            if _current is self:
                _current = None

    def _fail(self, exc: Exception, what: str) -> None:
        self.errors += 1
        if self.errors == 1:
            log.warning("stethoscope probe failed %s: %s; the run goes on", what, exc, exc_info=exc)
        if self.strict:
            raise InternalError(f"stethoscope probe failed {what}: {exc!r}") from exc


class FindingInbox:
    """A stage of the Monitor's observer chain: the detectors' findings, plus those the probe put in."""

    def __init__(self, probe: LiveProbe) -> None:
        self.probe = probe
        self._items: deque[Finding] = deque()

    def put(self, finding: Finding) -> None:
        self._items.append(finding)

    def _take(self) -> list[Finding]:
        out = []
        while self._items:
            out.append(self._items.popleft())
        return out

    def see(self, points: Any, findings: list[Finding]) -> list[Finding]:
        if findings:
            self.probe.last_finding = findings[-1]
        return findings + self._take()

    def end(self, findings: list[Finding]) -> list[Finding]:
        return findings + self._take()


# -- eval: output captured per thread, never into the trainer's stdout ---------------------------
class _ThreadStream(io.TextIOBase):
    """Stands in for sys.stdout/stderr while an eval runs: the eval thread's writes go to its buffer,
    every other thread's to the real stream."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.buffers: dict[int, io.StringIO] = {}

    def write(self, s: str) -> int:
        buf = self.buffers.get(threading.get_ident())
        return buf.write(s) if buf is not None else self.real.write(s)

    def flush(self) -> None:
        if threading.get_ident() not in self.buffers:
            self.real.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


_streams_lock = threading.Lock()


_EVAL_MODULES = ("gc", "os", "sys", "threading", "time", "traceback")
"""Imported for every eval, like a debugger's prompt: `len(gc.get_objects())` works whatever __main__ imported."""


def run_code(code: str, extra: dict[str, Any]) -> dict[str, Any]:
    """Run `code` (an expression: its repr is returned; else statements) in a copy of __main__'s namespace,
    plus the standard modules above and every top-level module the process already loaded (torch, numpy…)
    under its own name, where __main__ does not use that name."""
    import importlib

    main = sys.modules.get("__main__")
    ns = dict(vars(main)) if main is not None else {}
    for name in _EVAL_MODULES:
        ns.setdefault(name, importlib.import_module(name))
    for name, module in list(sys.modules.items()):
        if "." not in name and not name.startswith("_") and module is not None:
            ns.setdefault(name, module)
    ns.update(extra)
    me = threading.get_ident()
    buf = io.StringIO()
    with _streams_lock:
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            if not isinstance(stream, _ThreadStream):
                stream = _ThreadStream(stream)
                setattr(sys, name, stream)
            stream.buffers[me] = buf
    value, error = None, None
    try:
        tree = ast.parse(code, "<probe eval>", "exec")
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, "<probe eval>", "exec"), ns)  # noqa: S102 - eval is opt-in (allow_eval)
        if last is not None:  # like a REPL: the value of a final expression is the answer
            value = repr(eval(compile(ast.Expression(last.value), "<probe eval>", "eval"), ns))  # noqa: S307
    except BaseException:  # noqa: BLE001 - the user's code: its traceback is the answer
        error = traceback.format_exc(limit=-5)
    finally:
        with _streams_lock:
            for name in ("stdout", "stderr"):
                stream = getattr(sys, name)
                if isinstance(stream, _ThreadStream):
                    stream.buffers.pop(me, None)
                    if not stream.buffers:
                        setattr(sys, name, stream.real)
    return {"value": value, "output": buf.getvalue(), "error": error}


def _memory_gib() -> float:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return float(torch.cuda.memory_allocated()) / float(1 << 30)
    import psutil

    return psutil.Process().memory_info().rss / float(1 << 30)


# -- one probe per process ------------------------------------------------------------------------
def current() -> LiveProbe | None:
    return _current


def start(config: ProbeConfig | None = None, **kwargs: Any) -> LiveProbe:
    """Start this process's probe (or return the one already running)."""
    global _current
    with _current_lock:
        if _current is None:
            _current = LiveProbe(config, **kwargs)
        return _current


def for_monitor(serve: Any, owner: Any, *, run_dir: Any, rank: int, world_size: int, recorder: Any,
                model: Any = None, strict: bool = False) -> LiveProbe | None:
    """The Monitor's probe: the one `stethoscope run` started (adopted), or a new one; None when serve=False."""
    global _current
    if serve is False:
        return None
    config = serve if isinstance(serve, ProbeConfig) else None
    if serve is not True and config is None:
        raise ValueError(f"serve must be True, False or a ProbeConfig, got {serve!r}")
    with _current_lock:
        probe = _current
        if probe is not None and probe._owner is None:
            probe._adopted = True
            if config is not None:  # the Monitor's watchdog/health options; the server keeps its address
                probe.config = dataclasses.replace(config, host=probe.config.host, port=probe.config.port,
                                                   allow_remote=probe.config.allow_remote,
                                                   allow_eval=probe.config.allow_eval or config.allow_eval)
        else:
            probe = LiveProbe(config, run_dir=run_dir, rank=rank, world_size=world_size, strict=strict)
            if _current is None:
                _current = probe
    try:
        probe.attach(owner, run_dir=run_dir, rank=rank, world_size=world_size, recorder=recorder, model=model)
    except BaseException:
        probe.close()
        raise
    return probe
