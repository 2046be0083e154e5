"""What is inside a checkpoint, ours or another tool's: files, tensor keys/shapes/dtypes, step, sizes.

Layouts: ours (`step-N/` + manifest.json), HF Trainer (`checkpoint-N/` with trainer_state.json,
optimizer.pt, scheduler.pt, *.safetensors / *.bin) and Megatron (`iter_XXXXXXX/mp_rank_XX/*.pt` beside
`latest_checkpointed_iteration.txt`). safetensors headers are read directly (no library needed); .pt
files load with `weights_only=True` and memory-mapped, unless `trust=True`.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path
from typing import Any

from stethoscope.checkpoint.manifest import MANIFEST

_HF = re.compile(r"^checkpoint-(\d+)$")
_MEGATRON = re.compile(r"^iter_(\d+)$")
_OURS = re.compile(r"^step-(\d+)$")
WEIGHTS = (".pt", ".bin", ".pth", ".ckpt", ".safetensors")


def layout(path: Path) -> str:
    """"stethoscope", "hf", "megatron" or "files" for one checkpoint folder or a file."""
    if (path / MANIFEST).is_file() or _OURS.match(path.name):
        return "stethoscope"
    if _HF.match(path.name) or (path / "trainer_state.json").is_file():
        return "hf"
    if _MEGATRON.match(path.name) or any(path.glob("mp_rank_*")):
        return "megatron"
    return "files"


def checkpoints_in(root: Path) -> list[tuple[int | None, Path, str]]:
    """(step, folder, layout) of every checkpoint under `root` (or `root` itself), oldest first."""
    found = []
    for p in sorted(root.iterdir()) if root.is_dir() else ():
        for rx, kind in ((_OURS, "stethoscope"), (_HF, "hf"), (_MEGATRON, "megatron")):
            m = rx.match(p.name)
            if m and p.is_dir():
                found.append((int(m.group(1)), p, kind))
    if not found and root.exists():
        return [(None, root, layout(root))]
    return sorted(found, key=lambda t: t[0] or 0)


def megatron_latest(root: Path) -> int | None:
    """The iteration named by Megatron's `latest_checkpointed_iteration.txt`, when present."""
    try:
        text = (root / "latest_checkpointed_iteration.txt").read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def inspect(path: Path, trust: bool = False, max_tensors: int = 2000) -> dict[str, Any]:
    """A description of the checkpoint at `path`: layout, step, files, tensors (first `max_tensors`)."""
    note = None
    if path.is_dir() and megatron_latest(path) is not None:
        path = path / f"iter_{megatron_latest(path):07d}"
    elif path.is_dir() and layout(path) == "files":  # a folder of checkpoints (ckpt/, an HF output_dir): the newest
        steps = [p for step, p, _ in checkpoints_in(path) if step is not None]
        if steps:
            note = f"{path} holds {len(steps)} checkpoints; the newest, {steps[-1].name}, is inspected"
            path = steps[-1]
    kind = layout(path) if path.is_dir() else "files"
    out: dict[str, Any] = {"path": str(path), "layout": kind, "step": _step_of(path, kind), "files": [],
                           "tensors": [], "problems": [], "note": note}
    files = sorted(f for f in path.rglob("*") if f.is_file()) if path.is_dir() else [path]
    for f in files:
        rel = str(f.relative_to(path)) if path.is_dir() else f.name
        out["files"].append({"name": rel, "bytes": f.stat().st_size})
        if f.suffix in WEIGHTS and len(out["tensors"]) < max_tensors:
            try:
                out["tensors"] += [{"file": rel, **t} for t in _tensors(f, trust)][:max_tensors - len(out["tensors"])]
            except Exception as exc:  # noqa: BLE001 - one unreadable file is reported, the rest still shown
                out["problems"].append(f"{rel}: {_why(exc)}")
    out["bytes"] = sum(f["bytes"] for f in out["files"])
    if kind == "hf" and (path / "trainer_state.json").is_file():
        out["trainer_state"] = _trainer_state(path / "trainer_state.json")
    return out


def _step_of(path: Path, kind: str) -> int | None:
    for rx in (_OURS, _HF, _MEGATRON):
        m = rx.match(path.name)
        if m:
            return int(m.group(1))
    if kind == "stethoscope":
        try:
            return json.loads((path / MANIFEST).read_text()).get("step")
        except (OSError, ValueError):
            return None
    return None


def _trainer_state(path: Path) -> dict[str, Any]:
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return {"error": str(exc)}
    keys = ("global_step", "epoch", "best_metric", "best_model_checkpoint", "max_steps")
    return {k: state.get(k) for k in keys if k in state} | {"log_entries": len(state.get("log_history", []))}


def _tensors(path: Path, trust: bool) -> list[dict[str, Any]]:
    if path.suffix == ".safetensors":
        return safetensors_header(path)
    import torch

    obj = torch.load(path, map_location="cpu", weights_only=not trust, mmap=True)
    out: list[dict[str, Any]] = []
    _walk(obj, "", out)
    return out


def _walk(obj: Any, prefix: str, out: list[dict[str, Any]]) -> None:
    import torch

    if isinstance(obj, torch.Tensor):
        out.append({"key": prefix or "(tensor)", "shape": list(obj.shape), "dtype": str(obj.dtype).removeprefix("torch."),
                    "bytes": obj.numel() * obj.element_size()})
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _walk(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _walk(v, f"{prefix}.{i}" if prefix else str(i), out)


def safetensors_header(path: Path) -> list[dict[str, Any]]:
    """Tensor names, shapes, dtypes and sizes from a .safetensors header (8-byte length + JSON)."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise ValueError("shorter than a safetensors header")
        (n,) = struct.unpack("<Q", head)
        if n > 100 << 20:
            raise ValueError(f"safetensors header length {n} is implausible (not a safetensors file?)")
        header = json.loads(f.read(n))
    return [{"key": k, "shape": v["shape"], "dtype": v["dtype"], "bytes": v["data_offsets"][1] - v["data_offsets"][0]}
            for k, v in header.items() if k != "__metadata__"]


def _why(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    if "weights_only" in text or "Unsupported global" in text:
        m = re.search(r"Unsupported global: GLOBAL ([\w.]+)", text)
        what = f" ({m.group(1)})" if m else ""
        return f"holds pickled Python objects{what}; not loaded without --trust (only for files you trust)"
    return f"{type(exc).__name__}: {text[:200]}"
