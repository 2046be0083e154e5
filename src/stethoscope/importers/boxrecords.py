"""Records a trainer prints as a box of `| name | value |` rows between rules of dashes, one box a logging
step (Stable-Baselines3's logger; a row that ends in `/` heads a section, its rows' names are under it):

    ---------------------------------
    | rollout/           |          |
    |    ep_rew_mean     | -1.2e+03 |
    | time/              |          |
    |    total_timesteps | 2048     |
    | train/             |          |
    |    loss            | 12.3     |
    ---------------------------------

A box's step is its count of the steps done (`total_timesteps`: the axis SB3 logs every value at), else a step
key as a CSV has one (`step`, `global_step`, `iteration` …, by its last part), else its `epoch` where nothing finer
counts (OpenAI baselines' HER prints a box an epoch: `| epoch | 5 |`, after its settings `_Q_lr: 0.001` a line); its other counters
(`iterations`, `n_updates`) are values. What a launcher or logger prints before each line is skipped; other
console output around the boxes is kept as log lines.
"""

from __future__ import annotations

import re
from pathlib import Path

from stethoscope.importers.base import ImportedRun
from stethoscope.importers.source import is_text, read_text
from stethoscope.importers.tabular import step_key
from stethoscope.logtext.console_line import ANSI
from stethoscope.logtext.loglines import LineKeeper
from stethoscope.logtext.names import FileNames, scaled_row
from stethoscope.logtext.table import PointTable, describe, to_float

NAME = "boxrecords"
_RULE = re.compile(r"-{12,}\s*$")
_ROW = re.compile(r"\|\s+(?P<key>[A-Za-z_][\w/.\- ]*?)\s+\|\s+(?P<value>\S*)\s*\|\s*$")
_DONE = re.compile(r"(?:^|[/_])(?:total_)?(?:time)?steps$")  # the steps done: `time/total_timesteps`


def _step(keys: list[str]) -> str | None:
    """The box's step key: the steps done, else a step key by its last part, else the epoch (a box an epoch)."""
    done = next((k for k in keys if _DONE.search(k)), None)
    if done:
        return done
    last = {k.rsplit("/", 1)[-1]: k for k in keys}
    key = step_key(list(last))
    return last[key] if key else last.get("epoch")


class BoxRecordsImporter:
    """Boxes of `| name | value |` rows, one a logging step (Stable-Baselines3)."""

    name = NAME

    def sniff(self, path: Path, head: str) -> bool:
        if not is_text(head) or "-" * 12 not in head or "|" not in head:
            return False
        text = ANSI.sub("", head) if "\x1b" in head else head
        return any(_step(list(box)) for box in _boxes(text.splitlines()[:2000], None)[:3])

    def read(self, path: Path) -> ImportedRun:
        text = read_text(path)
        lines = (ANSI.sub("", text) if "\x1b" in text else text).splitlines()
        table, keeper, names = PointTable(), LineKeeper(), FileNames()
        for number, box in enumerate(_boxes(lines, keeper), 1):
            key = _step(list(box))
            step = to_float(box.get(key, "")) if key else None
            if step is None or not step.is_integer():
                continue
            values = {names(k).name: v for k, v in box.items() if k != key and to_float(v) is not None}
            table.add_row(number, int(step), None, *scaled_row(values, names.scales))
        built, rejected = table.build_columns()
        return ImportedRun(str(path), NAME, None, {}, describe(rejected, lambda ln: f"{path}:{ln}"), keeper.lines(),
                           columns=built)


def _boxes(lines: list[str], keeper: LineKeeper | None) -> list[dict[str, str]]:
    """Each box's rows as {name under its section: value}, in order; other lines to `keeper`."""
    boxes: list[dict[str, str]] = []
    box: dict[str, str] | None = None
    section = ""
    for number, line in enumerate(lines, 1):
        if _RULE.search(line):
            if box:
                boxes.append(box)
            box, section = {}, ""
            continue
        row = _ROW.search(line) if box is not None else None
        if row is None:
            if keeper is not None and line.strip():
                keeper.offer(number, line, None)
            continue
        key, value = row["key"].strip(), row["value"]
        if key.endswith("/") and not value:
            section = key
        else:
            box[section + key] = value  # type: ignore[index]
    if box:
        boxes.append(box)
    return boxes
