"""TensorBoard event files (`events.out.tfevents.*`), every scalar point of every tag.

Read record by record with tensorboard's own loader: never through `EventAccumulator`'s defaults,
which silently keep only 10,000 points per tag. Both scalar kinds are read: `simple_value`
(tf1, torch's SummaryWriter, tensorboardX) and scalar tensors of the `scalars` plugin (tf2, whose
plugin metadata comes only with a tag's first event). Tags map onto our names (`train/loss`, `loss`,
`Loss/train`, Megatron's `lm loss`, `learning-rate`; units in a tag are converted: `mem-reserved-bytes`
→ `memory/cuda_reserved_gib` in GiB …); the wall time of each train-loss event since the first is
`perf/elapsed_s`, the clock that times steps when no step time is logged; Megatron's `… vs samples`/`… vs tokens` tags
count in samples or tokens, not steps, and are left out. tensorboard is imported only here, when a
file is read (the `tensorboard` extra).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stethoscope.errors import InputError
from stethoscope.importers.base import Columns, ImportedRun
from stethoscope.detect.names import ELAPSED, Resolved
from stethoscope.logtext.names import FileNames, closest
from stethoscope.importers.source import check_file
from stethoscope.logtext.table import PointTable, describe, gc_paused
from stethoscope.records import LOSS

NAME = "tensorboard"
_RECORD_OVERHEAD = 16  # length (8) + length crc (4) + data crc (4)
_OTHER_AXIS = (" vs samples", " vs tokens", " vs steps")


class TensorBoardImporter:
    """`events.out.tfevents.*` files."""

    name = NAME

    def sniff(self, path: Path, head: str) -> bool:
        return "tfevents" in path.name

    def read(self, path: Path) -> ImportedRun:
        check_file(path)
        loader, event_pb2 = _tensorboard(path)
        reader = _Reader(path)
        try:
            with gc_paused():
                for raw in loader.RawEventFileLoader(str(path)).Load():
                    reader.record(raw, event_pb2.Event.FromString)
        except OSError as exc:
            raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
        return reader.result()


def _tensorboard(path: Path) -> tuple[Any, Any]:
    try:
        from tensorboard.backend.event_processing import event_file_loader
        from tensorboard.compat.proto import event_pb2
    except ImportError:
        raise InputError(path, "reading TensorBoard event files needs the tensorboard package: "
                               "pip install 'stethoscope[tensorboard]'") from None
    return event_file_loader, event_pb2


class _Reader:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.table = PointTable()
        self.consumed = 0
        self.records = 0
        self.plugins: dict[str, str] = {}
        self.names: dict[str, Resolved | None] = {}
        self.keys: dict[str, str] = {}  # tag -> the name its points are stored under while reading
        self.first: dict[str, str] = {}  # our name -> the first tag that took it
        self.resolve = FileNames()
        self.other: dict[str, int] = {}
        self.warnings: list[str] = []
        self.clock: list[float] = []  # [the last step, the first event's wall time]

    def record(self, raw: bytes, parse: Any) -> None:
        self.consumed += len(raw) + _RECORD_OVERHEAD
        self.records += 1
        try:
            event = parse(raw)
        except Exception as exc:  # protobuf's DecodeError has no stable import path across versions
            self.warnings.append(f"{self.path}: record {self.records} is not a valid event ({exc}); skipped")
            return
        for value in event.summary.value:
            number = self._scalar(value)
            if number is not None:
                found = self._name(value.tag)
                if found is not None:
                    self.table.add(self.records, event.step, event.wall_time or None, self.keys[value.tag],
                                   number * found.scale)
                    if found.name == LOSS:
                        self._tick(event.step, event.wall_time)

    def _tick(self, step: int, wall: float) -> None:
        """The clock at the train loss's events: in their step order (an eval logged at a later step first would
        read as a step back, a resume, and would date the clock early)."""
        if not wall or (self.clock and self.clock[0] == step):
            return
        self.clock = [step, self.clock[1] if self.clock else wall]
        self.table.add(self.records, step, wall, ELAPSED, wall - self.clock[1])

    def _scalar(self, value: Any) -> float | None:
        if value.HasField("metadata") and value.metadata.plugin_data.plugin_name:
            self.plugins[value.tag] = value.metadata.plugin_data.plugin_name
        kind = value.WhichOneof("value")
        if kind == "simple_value":
            return value.simple_value
        if kind != "tensor" or self.plugins.get(value.tag) != "scalars":
            if kind:
                self.other[value.tag] = self.other.get(value.tag, 0) + 1
            return None
        return tensor_scalar(value.tensor)

    def _name(self, tag: str) -> Resolved | None:
        if tag not in self.names:
            found = self.names[tag] = None if tag.endswith(_OTHER_AXIS) else self.resolve(tag)
            if found is not None:  # a later tag of the same name waits under its own key (`_settle_names`)
                first = self.first.setdefault(found.name, tag)
                self.keys[tag] = found.name if first == tag else f"{found.name}\x00{tag}"
        return self.names[tag]

    def _settle_names(self, columns: Columns) -> Columns:
        """Tags that name one series (detectron2's `total_loss` and its part `loss_ce`, both the loss by name): the
        closest spelling keeps the name (`names.closest`), the others their own; equally close ones stay merged
        (`train/loss` and `loss`)."""
        final: dict[str, str] = {}
        for name in self.first:
            tags = [t for t, n in self.names.items() if n is not None and n.name == name]
            if len(tags) < 2:
                continue
            keep = closest(tags, name)
            for tag in tags:
                final[self.keys[tag]] = name if tag in keep else "_".join(tag.split())
                self.names[tag] = Resolved(final[self.keys[tag]], self.names[tag].scale)  # type: ignore[union-attr]
        final = {k: v for k, v in final.items() if k != v}
        if not final:
            return columns
        return columns._replace(names=[final.get(n, n) for n in columns.names])

    def result(self) -> ImportedRun:
        size = self.path.stat().st_size
        if self.consumed < size:
            self.warnings.append(f"{self.path}: the last {size - self.consumed} bytes (from byte {self.consumed}) "
                                 "are a truncated or corrupt record; read up to there")
        columns, rejected = self.table.build_columns()
        columns = self._settle_names(columns)
        self.warnings += describe(rejected, lambda record: f"{self.path}: record {record}")
        meta: dict[str, Any] = {"tags": {t: n.name for t, n in self.names.items() if n is not None},
                                "events": self.records}
        skipped = [t for t, n in self.names.items() if n is None]
        if skipped:
            meta["skipped_tags"] = {t: "counted in samples/tokens, not steps" for t in skipped}
        if self.other:
            meta["non_scalar_tags"] = sorted(self.other)
        return ImportedRun(str(self.path), NAME, None, meta, self.warnings, columns=columns)


def tensor_scalar(tensor: Any) -> float | None:
    """The number in a one-element TensorProto, or None (not a scalar, not numeric)."""
    if tensor.float_val:
        return tensor.float_val[0]
    if tensor.double_val:
        return tensor.double_val[0]
    if tensor.int64_val:
        return float(tensor.int64_val[0])
    if tensor.int_val and tensor.dtype != 10:  # DT_BOOL stores in int_val too
        return float(tensor.int_val[0])
    from tensorboard.util import tensor_util

    try:
        array = tensor_util.make_ndarray(tensor)
    except (TypeError, ValueError):
        return None
    if array.size != 1 or array.dtype.kind not in "fiu":
        return None
    return float(array.reshape(-1)[0])
