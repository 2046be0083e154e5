"""Where a stuck thread waits: a pure classification of its stack (outermost frame first).

Categories: collective (all_reduce, barrier, …), data loader, checkpoint / file I/O, gc, compile,
device sync (CUDA synchronize, .item()), user code. Frames are dicts with function, file, line, code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stethoscope.findings.remedies import HANG_WHERE

COLLECTIVES = frozenset({
    "all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "reduce_scatter",
    "reduce_scatter_tensor", "broadcast", "broadcast_object_list", "barrier", "monitored_barrier", "reduce",
    "all_to_all", "all_to_all_single", "gather", "scatter", "send", "recv", "wait", "_wait", "batch_isend_irecv",
})
_SYNC_CODE = (".synchronize(", ".item()", ".cpu()", ".tolist()", "cuda.synchronize")


def classify(frames: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """{"where": category, "call": the function or line it waits in, "file", "line", "detail"}."""
    inner = list(reversed(frames))
    for check in (_collective, _data_loader, _gc, _compile, _file_io, _device_sync):
        found = check(inner)
        if found is not None:
            return found
    return _user_code(inner)


def _norm(path: str) -> str:
    return path.replace("\\", "/")


def _hit(where: str, f: dict[str, Any], call: str, detail: str) -> dict[str, Any]:
    return {"where": where, "call": call, "file": f.get("file", ""), "line": f.get("line"), "detail": detail}


def _collective(inner: list[dict[str, Any]]) -> dict[str, Any] | None:
    for f in inner:
        if "torch/distributed" in _norm(f.get("file", "")) and f.get("function") in COLLECTIVES:
            outermost = f
            for g in inner[inner.index(f):]:  # the user-facing call: the outermost collective frame in torch
                if "torch/distributed" in _norm(g.get("file", "")) and g.get("function") in COLLECTIVES:
                    outermost = g
            name = outermost["function"]
            return _hit("collective", outermost, name, f"waiting in torch.distributed.{name} (a collective: "
                        "another rank has not arrived)")
    return None


def _data_loader(inner: list[dict[str, Any]]) -> dict[str, Any] | None:
    for f in inner:
        if "torch/utils/data" in _norm(f.get("file", "")) and f.get("function") in (
                "__next__", "_next_data", "_get_data", "_try_get_data", "fetch"):
            return _hit("data_loader", f, "DataLoader.__next__", "waiting for the next batch (DataLoader)")
    return None


def _gc(inner: list[dict[str, Any]]) -> dict[str, Any] | None:
    top = inner[0] if inner else {}
    if "gc.collect(" in top.get("code", ""):
        return _hit("gc", top, "gc.collect", "in a garbage collection")
    return None


def _compile(inner: list[dict[str, Any]]) -> dict[str, Any] | None:
    for f in inner:
        p = _norm(f.get("file", ""))
        if "torch/_dynamo" in p or "torch/_inductor" in p or "torch/fx" in p:
            return _hit("compile", f, f.get("function", ""), "compiling (torch.compile / dynamo / inductor)")
    return None


def _file_io(inner: list[dict[str, Any]]) -> dict[str, Any] | None:
    for f in inner:
        p = _norm(f.get("file", ""))
        if "torch/serialization" in p and f.get("function") in ("save", "load", "_save", "_load"):
            return _hit("file_io", f, f"torch.{f['function'].lstrip('_')}", "saving or loading a checkpoint")
        if "safetensors" in p or "/checkpoint/" in p and "stethoscope" in p:
            return _hit("file_io", f, f.get("function", ""), "writing or reading a checkpoint")
    top = inner[0] if inner else {}
    code = top.get("code", "")
    if any(k in code for k in ("os.fsync(", ".write(", ".flush(", ".read(", "open(")):
        return _hit("file_io", top, code, "in file I/O")
    return None


def _device_sync(inner: list[dict[str, Any]]) -> dict[str, Any] | None:
    for f in inner:
        if "torch/cuda" in _norm(f.get("file", "")) and f.get("function") == "synchronize":
            return _hit("device_sync", f, "torch.cuda.synchronize", "waiting for the GPU (CUDA synchronize)")
    top = inner[0] if inner else {}
    if any(k in top.get("code", "") for k in _SYNC_CODE):
        return _hit("device_sync", top, top["code"], "waiting for the GPU (a host sync)")
    return None


def _user_code(inner: list[dict[str, Any]]) -> dict[str, Any]:
    if not inner:
        return {"where": "unknown", "call": "", "file": "", "line": None, "detail": "no Python frame"}
    user = next((f for f in inner if not _library(f.get("file", ""))), inner[0])
    call = user.get("code") or user.get("function", "")
    return _hit("user_code", user, call, f"in user code: {call}")


def _library(path: str) -> bool:
    p = _norm(path)
    return "site-packages/" in p or "/lib/python3" in p or p.startswith("<")


WHERE_TEXT = {
    "collective": "a collective (another rank has not arrived)",
    "data_loader": "the DataLoader (waiting for a batch)",
    "gc": "a garbage collection",
    "compile": "compilation (torch.compile)",
    "file_io": "checkpoint / file I/O",
    "device_sync": "a device sync (CUDA synchronize)",
    "user_code": "user code",
    "unknown": "no Python frame",
}


def cause(where: dict[str, Any]) -> list[str]:
    """The hang's probable cause as the stack shows it (the advice answers it with its fix), or none."""
    remedy = HANG_WHERE.get(where.get("where", ""))
    if remedy is None:
        return []
    at = f" at {where['file']}:{where['line']}" if where.get("file") else ""
    return [f"{remedy.cause}: {where.get('call') or '?'}{at}"]
