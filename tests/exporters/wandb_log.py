"""Read the history of an offline W&B run (`run-*.wandb`) with wandb's own protobuf records.

wandb 0.31 ships no Python reader for these files; their framing is LevelDB's log format (32 KiB
blocks; records of crc32c, length, type, data) after a 7-byte ":W&B" header, each record one
`wandb_internal_pb2.Record`.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

BLOCK = 32 * 1024
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list[object]:
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path}: not a W&B run file"
    out, pos, pending = [], HEADER, b""
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0 and length == 0:
            pos += left
            continue
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind == FULL:
            out.append(chunk)
        elif kind == FIRST:
            pending = chunk
        elif kind == MIDDLE:
            pending += chunk
        elif kind == LAST:
            out.append(pending + chunk)
    parsed = []
    for raw in out:
        rec = pb.Record()
        rec.ParseFromString(raw)
        parsed.append(rec)
    return parsed


def rows(path: Path) -> list[dict[str, object]]:
    """The history rows in the order they were logged, W&B's own keys (`_step`, `_timestamp`…) included."""
    return [{"/".join(i.nested_key) or i.key: json.loads(i.value_json) for i in rec.history.item}
            for rec in records(path) if rec.WhichOneof("record_type") == "history"]


def history(path: Path) -> dict[str, dict[int, float]]:
    """{metric: {training step: value}} of the numeric history rows (the step: `stethoscope/step`)."""
    out: dict[str, dict[int, float]] = {}
    for row in rows(path):
        step = int(row.pop("stethoscope/step", row["_step"]))  # type: ignore[call-overload]
        for key, value in row.items():
            if not key.startswith("_") and isinstance(value, (int, float)):
                out.setdefault(key, {})[step] = float(value)
    return out


def config(path: Path) -> dict[str, object]:
    for rec in records(path):
        if rec.WhichOneof("record_type") == "run":
            return {i.key: json.loads(i.value_json) for i in rec.run.config.update}
    return {}
