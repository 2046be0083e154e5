"""TensorBoard: event files written with the writer torch's `SummaryWriter` uses (tensorboard's own
`EventFileWriter`, no torch needed), one scalar per point, findings as text at their step."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stethoscope.exporters.base import ExportContext, Point
from stethoscope.extras import require
from stethoscope.records import Finding

FINDINGS_TAG = "stethoscope/findings"


class TensorBoard:
    """Writes to `logdir` (default: RUN_DIR/tensorboard; rank r of a multi-rank run in rank-r below it)."""

    def __init__(self, logdir: str | Path | None = None, flush_secs: float = 5.0) -> None:
        require("tensorboard", "tensorboard", "the TensorBoard exporter")  # fails early: before a Monitor starts
        self.logdir = None if logdir is None else Path(logdir)
        self.flush_secs = flush_secs
        self._writer: Any = None
        self._pb: Any = None

    def open(self, context: ExportContext) -> None:
        require("tensorboard", "tensorboard", "the TensorBoard exporter")
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        root = self.logdir if self.logdir is not None else context.run_dir / "tensorboard"
        self.logdir = root / f"rank-{context.rank}" if context.world_size > 1 else root
        self._pb = (event_pb2, summary_pb2)
        self._writer = EventFileWriter(str(self.logdir), max_queue_size=1000, flush_secs=self.flush_secs)

    def write(self, points: Sequence[Point], findings: Sequence[Finding]) -> None:
        event_pb2, summary_pb2 = self._pb
        add = self._writer.add_event
        Value = summary_pb2.Summary.Value
        values: list[Any] = []
        for i, (name, step, value, t) in enumerate(points):
            values.append(Value(tag=name, simple_value=value))
            if i + 1 == len(points) or points[i + 1][1] != step:  # one event per step: 5x fewer records
                add(event_pb2.Event(wall_time=t or 0.0, step=step, summary=summary_pb2.Summary(value=values)))
                values = []
        for f in findings:
            add(event_pb2.Event(wall_time=time.time(), step=f.step or 0, summary=_text(summary_pb2, f)))

    def close(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()


def _text(summary_pb2: Any, f: Finding) -> Any:
    from tensorboard.plugins.text.metadata import create_summary_metadata
    from tensorboard.util import tensor_util

    text = f"**{f.severity}** {f.type}: {f.message}"
    tensor = tensor_util.make_tensor_proto([text.encode()], shape=[1])
    return summary_pb2.Summary(value=[summary_pb2.Summary.Value(
        tag=FINDINGS_TAG, metadata=create_summary_metadata("stethoscope findings", ""), tensor=tensor)])
