"""Every thread's stack, as the interpreter sees it now (sys._current_frames: the current line of each
frame, not the function's first line), optionally with each frame's locals cut to a size limit."""

from __future__ import annotations

import linecache
import sys
import threading
import time
from typing import Any

MAX_FRAMES = 200
MAX_LOCALS = 40


def snapshot(with_locals: bool = False, max_chars: int = 200, skip_current: bool = True,
             redact: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """[{thread, ident, daemon, main, frames: [{function, file, line, code, locals?}, …] outermost first}];
    any local whose repr contains a string of `redact` (the probe's token) shows it as ***."""
    names = {t.ident: t for t in threading.enumerate()}
    main_ident = threading.main_thread().ident
    me = threading.get_ident()
    out = []
    for ident, frame in sys._current_frames().items():
        if skip_current and ident == me:
            continue
        t = names.get(ident)
        out.append({"thread": t.name if t is not None else f"thread-{ident}", "ident": ident,
                    "daemon": bool(t.daemon) if t is not None else None, "main": ident == main_ident,
                    "frames": _frames(frame, with_locals, max_chars, redact)})
    out.sort(key=lambda th: (not th["main"], th["thread"]))
    return out


def _frames(frame: Any, with_locals: bool, max_chars: int, redact: tuple[str, ...]) -> list[dict[str, Any]]:
    frames = []
    while frame is not None and len(frames) < MAX_FRAMES:
        code = frame.f_code
        line = frame.f_lineno
        item: dict[str, Any] = {"function": code.co_name, "file": code.co_filename, "line": line,
                                "code": linecache.getline(code.co_filename, line).strip()}
        if with_locals:
            item["locals"] = _locals(frame, max_chars, redact)
        frames.append(item)
        frame = frame.f_back
    frames.reverse()
    return frames


def _locals(frame: Any, max_chars: int, redact: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for i, (k, v) in enumerate(list(frame.f_locals.items())):
        if i >= MAX_LOCALS:
            out["…"] = f"{len(frame.f_locals) - MAX_LOCALS} more"
            break
        text = _short_repr(v, 1 << 20 if redact else max_chars)
        for secret in redact:
            text = text.replace(secret, "***")
        out[k] = text if len(text) <= max_chars else text[:max_chars] + "…"
    return out


def _short_repr(v: Any, max_chars: int) -> str:
    try:
        shape = getattr(v, "shape", None)
        if shape is not None and hasattr(v, "dtype") and type(v).__name__ in ("Tensor", "Parameter", "ndarray"):
            return f"{type(v).__name__}(shape={tuple(shape)}, dtype={v.dtype})"  # never the values: no device sync
        text = repr(v)
    except Exception as exc:  # noqa: BLE001 - a broken __repr__ in user code
        text = f"<repr failed: {type(exc).__name__}>"
    return text if len(text) <= max_chars else text[:max_chars] + "…"


def rows(threads: list[dict[str, Any]], snapshot_id: int, when: float | None = None) -> list[tuple[Any, ...]]:
    """Rows of the store's `stacks` table: (snapshot, time, thread, depth, function, file, line); depth 0
    is the innermost frame."""
    when = time.time() if when is None else when
    out = []
    for th in threads:
        frames = th["frames"]
        for depth, f in enumerate(reversed(frames)):
            out.append((snapshot_id, when, th["thread"], depth, f["function"], f["file"], f["line"]))
    return out


def main_thread(threads: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((th for th in threads if th["main"]), None)


def format_text(threads: list[dict[str, Any]]) -> str:
    """Like a Python traceback, one block per thread (most recent call last)."""
    lines = []
    for th in threads:
        tag = " (main)" if th.get("main") else (" (daemon)" if th.get("daemon") else "")
        lines.append(f"Thread {th['thread']}{tag}:")
        for f in th["frames"]:
            lines.append(f'  File "{f["file"]}", line {f["line"]}, in {f["function"]}')
            if f.get("code"):
                lines.append(f"    {f['code']}")
            for k, v in (f.get("locals") or {}).items():
                lines.append(f"      {k} = {v}")
        lines.append("")
    return "\n".join(lines)
