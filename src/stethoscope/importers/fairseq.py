"""fairseq / metaseq training logs, text or JSON progress format, current and legacy layouts.

    2020-03-23 11:39:44 | INFO | train_inner | epoch 003:      5 / 356 loss=9.44, …, num_updates=700, …
    2020-03-23 11:38:13 | INFO | train | epoch 002 | loss 9.803 | … | num_updates 695 | …
    2020-03-23 11:38:31 | INFO | valid | epoch 002 | valid on 'valid' subset | loss 9.393 | … | num_updates 695
    | epoch 027 | loss 6.343 | … | num_updates 10198 | … | loss_scale 0.500 | …          (≤ 0.9, no time)
    | epoch 027 | valid on 'valid' subset | valid_loss 8.30118 | … | num_updates 10198 | best 4.46376
    … | INFO | train_inner | {"epoch": 1, "update": 1.001, "loss": "15.683", …, "num_updates": "1"}
    | WARNING: overflow detected, setting loss scale to: 0.25

The step is `num_updates` (fairseq counts updates from 1). End-of-epoch `train` lines (epoch
averages) use the same names as the `train_inner` interval averages. An fp16 overflow skips the update
it happened in: `train/skipped_iterations` counts them and `amp/loss_scale` takes the new scale, at
the next train line, or at last update + 1 when none follows. `loss_scale 0` is the logger rounding
a tiny scale to 0 decimals: left out.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from stethoscope.importers.base import ImportedRun
from stethoscope.logtext.loglines import LineKeeper, parse_timestamp
from stethoscope.logtext.names import EPOCH
from stethoscope.importers.source import is_text, read_lines
from stethoscope.logtext.table import PointTable, describe, to_float
from stethoscope.records import EVAL_LOSS, GRAD_NORM, LOSS, LOSS_SCALE, LR, SKIPPED, TOKENS_PER_S

NAME = "fairseq"
_SNIFF = re.compile(r"\| (?:train_inner|train|valid) \| |^\| epoch \d+(?: \||:\s+\d+ / \d+ )|\| INFO \| fairseq",
                    re.MULTILINE)
_INNER = re.compile(r"^epoch (\d+):\s+(\d+) / (\d+) (.*)$")
_EPOCH = re.compile(r"^epoch (\d+)$")
_SUBSET = re.compile(r"^valid on '([^']+)' subset$")
_OVERFLOW = re.compile(r"overflow detected, setting loss scale to:\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")
_KV_SPACE = re.compile(r"^([A-Za-z_][\w.]*) (\S+)$")
_NUMBER = re.compile(r"^([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf))(%?)$", re.IGNORECASE)
_CATEGORIES = ("train_inner", "train", "valid", "test")
_CUT = re.compile(r"num_updates|\bloss\b")

_TRAIN_NAMES = {
    "loss": LOSS, "nll_loss": "train/nll_loss", "ppl": "train/ppl", "wps": TOKENS_PER_S,
    "ups": "perf/updates_per_s", "wpb": "train/tokens_per_batch", "bsz": "train/batch_size", "lr": LR,
    "gnorm": GRAD_NORM, "clip": "grad/clipped_pct", "oom": "train/oom", "loss_scale": LOSS_SCALE,
    "train_wall": "perf/train_wall_s", "wall": "perf/wall_s", "gb_free": "memory/gpu_free_gib",
    "epoch": EPOCH, "update": "train/epoch_progress",
}


def fairseq_name(key: str) -> str | None:
    """Our name for a fairseq train-line key (`gnorm` → grad/norm, `wps` → perf/tokens_per_s …), or None."""
    return _TRAIN_NAMES.get(key)


def _eval_name(key: str, subset: str) -> str:
    namespace = "test" if subset == "test" else "eval"
    for prefix in ("valid_", f"{subset}_"):
        key = key.removeprefix(prefix)
    if key == "loss":
        return EVAL_LOSS if namespace == "eval" else "test/loss"
    if key in ("best", "best_loss"):
        return f"{namespace}/best_loss"
    return f"{namespace}/{key}"


class FairseqImporter:
    """fairseq / metaseq logs (see the module docstring for the layouts)."""

    name = NAME

    def sniff(self, path: Path, head: str) -> bool:
        return is_text(head) and _SNIFF.search(head) is not None

    def read(self, path: Path) -> ImportedRun:
        return read_lines(path, _Reader(path), _CUT)


class _Reader:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.table = PointTable()
        self.keeper = LineKeeper()
        self.last_step: int | None = None
        self.overflows = 0
        self.scale: float | None = None
        self.zero_scales = 0
        self.kinds: dict[str, int] = {"inner": 0, "epoch": 0}  # train lines: interval records, epoch summaries
        self.warnings: list[str] = []

    def line(self, line: int, text: str) -> bool:
        """Read one line; True when it had metrics."""
        time, skip = parse_timestamp(text)
        segments = [s.strip() for s in text[skip:].split("|")]
        segments = [s for s in segments if s]
        category = next((s for s in segments[:3] if s in _CATEGORIES), None)
        overflow = _OVERFLOW.search(text)
        if overflow:
            self.overflows += 1
            self.scale = float(overflow.group(1))
        if segments and self._metrics(line, time, category, segments):
            return True
        self.keeper.offer(line, text, self.last_step)
        return False

    def _metrics(self, line: int, time: float | None, category: str | None, segments: list[str]) -> bool:
        fields, subset = self._fields(segments)
        if not fields:
            return False
        if subset is None and category in ("valid", "test"):
            subset = category
        step = _step(fields.pop("num_updates", None) or fields.pop(f"{subset}_num_updates", None)
                     or fields.pop("valid_num_updates", None))
        if step is None:  # every fairseq metric line has its update count; without it, it was cut
            return False
        values = self._values(fields, subset)
        if subset is None:
            self.kinds["epoch" if category == "train" else "inner"] += 1
            self._absorb_overflows(values)
            self.last_step = step
        self.table.add_values(line, step, time, values)
        return True

    def _fields(self, segments: list[str]) -> tuple[dict[str, str], str | None]:
        fields: dict[str, str] = {}
        subset = None
        for segment in segments:
            if segment.startswith("{"):
                fields.update(_json_fields(segment))
            elif m := _INNER.match(segment):
                fields["epoch"] = m.group(1)
                fields.update(_pairs(m.group(4)))
            elif m := _SUBSET.match(segment):
                subset = m.group(1)
            elif m := _EPOCH.match(segment):
                fields["epoch"] = m.group(1)
            elif m := _KV_SPACE.match(segment):
                fields[m.group(1)] = m.group(2)
        return fields, subset

    def _values(self, fields: dict[str, str], subset: str | None) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for key, text in fields.items():
            number = _number(text)
            if number is None:
                continue
            if subset is not None:
                if key != "epoch":  # the train lines carry it
                    values[_eval_name(key, subset)] = number
                continue
            if key == "loss_scale" and number == 0:
                self.zero_scales += 1
                continue
            values[fairseq_name(key) or f"train/{key}"] = number
        return values

    def _absorb_overflows(self, values: dict[str, Any]) -> None:
        if self.overflows:
            values[SKIPPED] = float(self.overflows)
            if self.scale is not None and LOSS_SCALE not in values:
                values[LOSS_SCALE] = self.scale
        self.overflows, self.scale = 0, None

    def result(self) -> ImportedRun:
        if self.overflows and self.last_step is not None:
            values: dict[str, Any] = {}
            self._absorb_overflows(values)
            self.table.add_values(0, self.last_step + 1, None, values)
        columns, rejected = self.table.build_columns()
        meta: dict[str, Any] = {}
        if not self.kinds["inner"]:  # epoch summaries and valid lines alone: what another reader reads may be the run's
            meta["no_train_inner"] = True
        if self.zero_scales:
            meta["notes"] = {"loss_scale_zero": f"{self.zero_scales} `loss_scale 0` values left out: the logger "
                                                "rounds a tiny scale to 0 decimals"}
        warnings = self.warnings + describe(rejected, lambda line: f"{self.path}:{line}")
        return ImportedRun(str(self.path), NAME, None, meta, warnings, self.keeper.lines(), columns=columns)


def _pairs(text: str) -> dict[str, str]:
    out = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def _json_fields(segment: str) -> dict[str, str]:
    try:
        record = json.loads(segment)
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in record.items()} if isinstance(record, dict) else {}


def _number(text: str) -> float | None:
    m = _NUMBER.match(text.strip())
    return None if m is None else float(m.group(1))


def _step(text: str | None) -> int | None:
    number = to_float(text) if text is not None else None
    return int(number) if number is not None and number.is_integer() else None
