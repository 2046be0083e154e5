"""The CLI side of the probe: find a live process (PID, HOST:PORT or run directory), ask it, fan out to
every rank of a run. A dead or unreachable rank is an answer of its own, not an error of the whole call."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stethoscope.config import env_probe_token
from stethoscope.errors import StethoscopeError, UsageError
from stethoscope.probe import registry
from stethoscope.probe.registry import Entry

VERBS = ("status", "backtrace", "query", "eval", "dump")
_ADDRESS = re.compile(r"^\[?([0-9A-Za-z.\-:]+?)\]?:(\d{1,5})$")


class ProbeError(StethoscopeError):
    """A probe answered with an error status, or could not be reached."""

    exit_code = 1

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Answer:
    """One rank's answer: `result` when it answered, else `problem` ("dead", "unreachable", …)."""

    rank: int
    pid: int | None
    address: str
    result: dict[str, Any] | None = None
    problem: str | None = None
    status: int | None = None
    """The HTTP status of a refusal (400 bad query, 401, 403 eval disabled …); None when unreachable."""


class ProbeClient:
    def __init__(self, host: str, port: int, token: str, timeout: float = 30.0) -> None:
        self.host, self.port, self.token, self.timeout = host, port, token, timeout

    @classmethod
    def for_entry(cls, e: Entry, timeout: float = 30.0) -> ProbeClient:
        return cls(e.host, e.port, e.token, timeout)

    def request(self, path: str, body: dict[str, Any] | None = None, method: str | None = None) -> dict[str, Any]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        try:
            conn.request(method or ("POST" if data is not None else "GET"), path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        except OSError as exc:
            raise ProbeError(f"{self.host}:{self.port} unreachable ({exc.strerror or exc})") from None
        finally:
            conn.close()
        try:
            payload = json.loads(raw) if raw else {}
        except ValueError:
            payload = {"error": raw[:200].decode(errors="replace")}
        if resp.status != 200:
            error = payload.get("error", "")
            raise ProbeError(error if resp.status == 400 else f"{self.host}:{self.port} answered {resp.status}: {error}",
                             resp.status)
        return payload

    def call(self, verb: str, arg: str | None = None, with_locals: bool = False, engine: str = "auto") -> dict[str, Any]:
        if verb == "status":
            return self.request("/status")
        if verb == "backtrace":
            return self.request("/backtrace?locals=1" if with_locals else "/backtrace")
        if verb == "query":
            return self.request("/query", {"sql": arg or "", "engine": engine})
        if verb == "eval":
            return self.request("/eval", {"code": arg or ""})
        if verb == "dump":
            return self.request("/dump", {})
        raise UsageError(f"unknown verb {verb!r}; expected one of {', '.join(VERBS)}")


# -- finding the target ---------------------------------------------------------------------------
def resolve(target: str, token: str | None = None) -> list[Entry]:
    """The live entries a TARGET names: a PID, HOST:PORT, or a run directory (all its ranks)."""
    if target.isdigit():
        return registry.by_pid(int(target))
    m = _ADDRESS.match(target)
    if m and not Path(target).exists():
        host, port = m.group(1), int(m.group(2))
        known = [e for e in registry.live_entries(prune=False) if e.port == port and e.host == host]
        if known:
            return known[:1]
        tok = token or env_probe_token()
        if not tok:
            raise UsageError(f"{target}: no token known for this address; pass --token or set $STETHOSCOPE_TOKEN "
                             "(the token is in the run directory's probe-rank-*.json, readable by its owner only)")
        return [Entry(pid=0, host=host, port=port, token=tok)]
    p = Path(target)
    if p.is_dir():
        found = registry.run_entries(p)
        if not found:
            raise UsageError(f"{target}: no probe server registered in this run directory (no probe-rank-*.json: "
                             "the run is not live, or was started with serve=False)")
        return found
    raise UsageError(f"{target}: not a PID, HOST:PORT or run directory")


def ask_all(entries: list[Entry], verb: str, arg: str | None = None, with_locals: bool = False,
            timeout: float = 30.0, engine: str = "auto") -> list[Answer]:
    """Ask every entry at once; each answer says what it got or why it got nothing."""
    def one(e: Entry) -> Answer:
        a = Answer(e.rank, e.pid or None, e.address)
        if e.pid and not registry.alive(e.pid):
            a.problem = f"dead (pid {e.pid} is not running)"
            return a
        try:
            a.result = ProbeClient.for_entry(e, timeout).call(verb, arg, with_locals, engine)
        except ProbeError as exc:
            a.problem = str(exc) if exc.status is not None else f"unreachable ({exc})"
            a.status = exc.status
        return a

    if len(entries) == 1:
        return [one(entries[0])]
    with ThreadPoolExecutor(max_workers=min(32, len(entries))) as pool:
        return list(pool.map(one, entries))


# -- a Python process that never imported stethoscope ----------------------------------------------
def py_spy_dump(pid: int, with_locals: bool = False, timeout: float = 30.0) -> str:
    """Every thread's stack via py-spy (needs ptrace permission); a clear UsageError when it cannot attach."""
    exe = find_py_spy()
    if exe is None:
        raise UsageError(f"pid {pid} has no stethoscope probe, and py-spy (the fallback) is not installed: "
                         "pip install 'stethoscope[probe]', or start the script with `stethoscope run -- python …`")
    if not registry.alive(pid):
        raise UsageError(f"pid {pid}: no such process")
    cmd = [exe, "dump", "--pid", str(pid)] + (["--locals"] if with_locals else [])
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise UsageError(f"py-spy dump --pid {pid} did not finish in {timeout:g} s") from None
    if res.returncode != 0:
        err = " ".join((res.stderr or res.stdout).split())[:300]
        if any(k in err.lower() for k in ("permission", "not permitted", "ptrace", "eperm")):
            raise UsageError(f"py-spy cannot attach to pid {pid}: ptrace is not permitted ({err}); run as root or "
                             "with CAP_SYS_PTRACE (docker: --cap-add SYS_PTRACE), or allow it with `sysctl "
                             "kernel.yama.ptrace_scope=0`; or start the script with `stethoscope run -- python …`")
        raise UsageError(f"py-spy dump --pid {pid} failed: {err}")
    return res.stdout


def find_py_spy() -> str | None:
    """py-spy on PATH, beside this interpreter, or where its wheel put its binary."""
    exe = shutil.which("py-spy") or shutil.which("py-spy", path=os.path.dirname(sys.executable))
    if exe:
        return exe
    try:
        from importlib.metadata import PackageNotFoundError, distribution

        files = distribution("py-spy").files or []
    except (ImportError, PackageNotFoundError):
        return None
    for f in files:
        if f.name == "py-spy":
            path = Path(str(f.locate())).resolve()
            if path.is_file() and os.access(path, os.X_OK):
                return str(path)
    return None


def is_python_process(pid: int) -> bool:
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return True  # not Linux, or not ours to read: let py-spy say
    return "python" in os.path.basename(exe)
