"""Export a finished or imported run: read its store back and hand it to an exporter, rank by rank."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stethoscope.errors import UsageError
from stethoscope.exporters.base import ExportContext
from stethoscope.records import Finding
from stethoscope.store.query import open_run

CHUNK = 10_000


@dataclass
class Exported:
    """What one rank's export wrote."""

    rank: int
    points: int
    findings: int
    exporter: Any


def export_run(path: str | os.PathLike[str], make: Callable[[], Any], ranks: list[int] | None = None,
               name: str | None = None, findings: Callable[[Any, int], list[Finding]] | None = None) -> list[Exported]:
    """Replay every rank (or `ranks`) of the run at `path` into a fresh exporter from `make()`; `name`
    (default: the run directory's) names the run in the tool. `findings(reader, rank)` gives the findings to
    send (the CLI: the incidents every view shows); default: the rows the live detectors stored."""
    out = []
    with open_run(path) as reader:
        unknown = sorted(set(ranks or ()) - set(reader.ranks))
        if unknown:
            raise UsageError(f"{path}: no rank {', '.join(map(str, unknown))} (ranks: "
                             f"{', '.join(map(str, reader.ranks))})")
        chosen = reader.ranks if ranks is None else [r for r in reader.ranks if r in ranks]
        for rank in chosen:
            context = ExportContext(run=name or _name(Path(path)), run_dir=Path(path), rank=rank,
                                    world_size=len(reader.ranks), config=_config(reader.meta(rank)))
            exporter = make()
            exporter.open(context)
            try:
                points, sent = _replay(reader, rank, exporter, (findings or _findings)(reader, rank))
            finally:
                exporter.close()
            out.append(Exported(rank, points, sent, exporter))
    return out


def _replay(reader: Any, rank: int, exporter: Any, findings: list[Finding]) -> tuple[int, int]:
    _, rows = reader.query("SELECT name, step, value, time FROM metrics WHERE rank = ? ORDER BY step, name", (rank,))
    nan = float("nan")
    points = [(name, step, nan if value is None else value, t) for name, step, value, t in rows]
    for start in range(0, len(points), CHUNK):
        exporter.write(points[start:start + CHUNK], [])
    exporter.write([], findings)
    return len(points), len(findings)


def _findings(reader: Any, rank: int) -> list[Finding]:
    _, rows = reader.query("SELECT type, severity, step, message, data FROM findings WHERE rank = ? ORDER BY id",
                           (rank,))
    out = []
    for kind, severity, step, message, data in rows:
        try:
            out.append(Finding.from_dict(json.loads(data)))
        except (TypeError, ValueError, KeyError):  # an imported event without the full record
            out.append(Finding(kind, severity if severity in ("info", "warning", "error", "critical") else "info",
                               step, message))
    return out


def _config(meta: dict[str, str]) -> dict[str, Any]:
    try:
        config = json.loads(meta.get("config", "null"))
    except ValueError:
        return {}
    return config if isinstance(config, dict) else {}


def _name(path: Path) -> str:
    p = path.resolve()
    return p.parent.name if p.is_file() else p.name
