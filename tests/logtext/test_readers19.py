"""Which number on a line is the step and which the loss: classes of the thirteenth grammar part (readers-19),
each as a general rule, with lines as the trainers print them."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from stethoscope.importers import read_any
from stethoscope.importers.base import ImportedRun
from stethoscope.records import LOSS
from tests.importers.series import read_text, series


def _read_bytes(data: bytes, name: str = "train.log") -> list[ImportedRun]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / name
        path.write_bytes(data)
        return read_any(path)


def _cast(version: int = 2) -> str:
    """A training run recorded with `asciinema rec`: output events, some cutting a line in two."""
    head = ({"version": 2, "width": 120, "height": 32, "timestamp": 1795835045,
             "env": {"SHELL": "/bin/bash", "TERM": "xterm-256color"}} if version == 2 else
            {"version": 3, "term": {"cols": 120, "rows": 32, "type": "xterm-256color"}, "timestamp": 1795835045})
    events: list[list[object]] = [[0.41, "o", "$ python train.py\r\n"]]
    t = 0.5
    for k in range(1, 13):
        line = f"step {10 * k:5d} | loss {3.0 - k / 20:.4f} | lr 3.0e-04 | 500 tok/s\r\n"
        cut = 12 if k % 3 == 0 else len(line)
        events.append([round(t, 6), "o", line[:cut]])
        if cut < len(line):
            events.append([round(t + 0.0007, 6), "o", line[cut:]])
        t += 0.3
    events.insert(3, [0.9, "r", "100x30"])  # a resize event: no output
    return json.dumps(head) + "\n" + "".join(json.dumps(e) + "\n" for e in events)


def test_an_asciinema_cast_is_read_as_the_terminal_printed_it() -> None:
    """`asciinema rec` saves JSON lines `[t, "o", "text"]`, a line often cut over two events: it was refused."""
    for version in (2, 3):
        (run,) = _read_bytes(_cast(version).encode(), "train.cast")
        assert series(run, LOSS) == {10 * k: round(3.0 - k / 20, 4) for k in range(1, 13)}
