"""Console logs of any trainer, read by the shape of their lines (`console_line.py`), not by a dialect.

The reader takes what the dedicated importers refuse (it is last in the sniffing order), and what they
read 0 steps from. Detection is by content: a text file qualifies when lines of its head carry a step
counter and a metric (or, for the 0-step report, when metric lines without a counter are all it has);
`meta["confidence"]` is the fraction of non-blank lines that were step lines and `meta["key_consistency"]`
the share of step lines with the most common set of keys.

Mixed content is read, not refused: ANSI colours are stripped, tracebacks, warnings and progress bars
go to the kept log lines, several launcher ranks interleaved keep one (rank 0, else the first seen; a
warning says so), and a step counter that goes back (a resume) is kept in file order as every importer
does. Lines without a counter belong to the step before them when they are a record of it: a dict repr
(the HF Trainer's `{'loss': …}` after its progress bar), an indented continuation (Composer's metric lines
after `[batch=N/T]:`), or eval values only (llm.c's `val loss X`). Progress-bar counters (`N/TOTAL [`) that
restart every epoch are made global by adding the earlier epochs' totals.

Speed: a line's shape is its text with the digits removed; the first line of each shape is parsed in
full and becomes a template (which number tokens are the step and which the values, with their names and
factors), and the following lines of that shape are read by one `findall` of their numbers.
"""

from __future__ import annotations

import re
from collections import Counter
from itertools import compress, groupby
from operator import gt
from pathlib import Path
from typing import Any

from stethoscope.importers.base import ImportedRun
from stethoscope.importers.console_fast import Template
from stethoscope.importers.console_line import (
    ANSI,
    MAGNITUDE,
    NUMBER,
    Line,
    key_name,
    parse,
)
from stethoscope.importers.loglines import LineKeeper, stamp_seconds
from stethoscope.importers.names import metric
from stethoscope.importers.source import is_text, read_bytes, read_text
from stethoscope.importers.table import Layout, PointTable, describe, to_float

NAME = "console"
SNIFF_LINES = 5000
MAX_TEMPLATES = 4096
_ANSI = re.compile(ANSI.pattern.encode())
# Cumulative clocks and running averages that the resolver would take for a step time.
_OWN = {"step avg (ms)": ("perf/step_avg_s", 1e-3), "train time (ms)": ("perf/train_time_s", 1e-3),
        "training time (ms)": ("perf/train_time_s", 1e-3), "step avg (s)": ("perf/step_avg_s", 1.0),
        "train time (s)": ("perf/train_time_s", 1.0)}
_SUMMARY = "train_runtime"  # the HF Trainer's end-of-run summary dict: not a step


class ConsoleImporter:
    """Any trainer's console log: a step counter and metrics per line, in the usual shapes."""

    name = NAME

    def sniff(self, path: Path, head: str) -> bool:
        if not is_text(head):
            return False
        steps = misses = 0
        for text in _clean(head).split("\n")[:SNIFF_LINES]:
            for segment in text.split("\r"):
                line = parse(segment)
                known = any(_is_metric(v.key, v.unit) for v in line.values)
                steps += known and line.step is not None
                misses += known and line.step is None
            if steps >= 1 or misses >= 3:
                return True
        return False

    def read(self, path: Path) -> ImportedRun:
        data = strip_ansi(read_bytes(path)).replace(b"\x08", b"")  # and Keras' backspaces before a redraw
        reader = ConsoleReader(str(path))
        reader.feed(data)
        return reader.result()


def strip_ansi(data: bytes) -> bytes:
    """`data` without ANSI escape codes: the few distinct codes of the first MiB removed by plain
    replaces (each a memchr-speed pass), a regex only for what is left."""
    if b"\x1b" not in data:
        return data
    for code in set(_ANSI.findall(data, 0, 1 << 20)):
        data = data.replace(code, b"")
    return _ANSI.sub(b"", data) if b"\x1b" in data else data


def _clean(text: str) -> str:
    return (ANSI.sub("", text) if "\x1b" in text else text).replace("\x08", "")


def _is_metric(key: str, unit: str) -> bool:
    name = key_name(key, unit)
    if name is None:
        return False
    resolved = metric(name).name
    return "/" in resolved and resolved != name


class ConsoleReader:
    """Reads the lines of one console log; `result()` builds the ImportedRun."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.table = PointTable()
        self.keeper = LineKeeper()
        self.templates: dict[bytes, Template | None] = {}
        self.names: dict[tuple[str, str, bool], tuple[str, float] | None] = {}
        self.warnings: list[str] = []
        self.last_step: int | None = None
        self.keep_rank: bytes | None = None
        self.ranks: Counter[str] = Counter()
        self.bar: tuple[int, int, int] | None = None  # (offset, last raw counter, total) of a per-epoch bar
        self.ordinal = 0
        self.last_row = 0
        self.near: dict[str, tuple[int, int, str]] = {}  # kind → (count, first line, its text)
        self.lines = self.step_lines = self.resumes = 0
        self.shapes: Counter[tuple[str, ...]] = Counter()

    def feed(self, data: bytes) -> None:
        """Read a whole ANSI-free log: runs of lines of one shape at once, the others one by one."""
        lines = data.split(b"\n")
        shapes = data.translate(None, b"0123456789").split(b"\n")
        start = 0
        for shape, run in groupby(shapes):
            end = start + len(list(run))
            self._run(lines, start, end, shape)
            start = end
        last = lines[-1].decode("utf-8", "replace")
        if last.strip() and NUMBER.search(last) and self.last_row != len(lines):
            self.warnings.append(f"{self.path}:{len(lines)}: the last line looks cut short (no newline, no "
                                 "metrics read from it)")

    def _run(self, lines: list[bytes], start: int, end: int, shape: bytes) -> None:
        if shape not in self.templates and b"\r" not in shape:
            self.line(start + 1, lines[start])
            start += 1
        template = self.templates.get(shape)
        if template is None or start >= end:
            for i in range(start, end):
                self.line(i + 1, lines[i])
            return
        rows = template.rows(lines[start:end])
        if rows is None:  # a line that only looks alike: each line alone
            for i in range(start, end):
                m = template.match(lines[i])
                if m:
                    self._rows(template, i + 1, [m.groups()])
                else:
                    self.line(i + 1, lines[i])
            return
        self._rows(template, start + 1, rows)

    def _rows(self, t: Template, first: int, rows: list[tuple[bytes, ...]]) -> None:
        self.lines += len(rows)
        keep, steps, values, times = t.columns(rows, self.keep_rank)
        if t.rank is not None:
            for rank, count in Counter(r[t.rank] or r[t.rank + 1] for r in rows).items():
                self.ranks[rank.decode()] += count
        origins: Any = range(first, first + len(rows))
        if keep is not None:
            origins = list(compress(origins, keep))
        ints = list(map(int, steps))
        if t.bar:
            ints = [self._step(s, True) for s in ints]
        if not ints:
            return
        self.resumes += sum(map(gt, ints, ints[1:])) + (self.last_step is not None and ints[0] < self.last_step)
        self.last_step = ints[-1]
        self.table.add_columns(t.layout, list(origins), ints, values, times)
        self.step_lines += len(ints)
        self.shapes[t.layout.names] += len(ints)
        self.last_row = origins[-1]

    def line(self, number: int, raw: bytes) -> None:
        """Read one physical line (tqdm's `\\r`-separated updates one by one)."""
        text = raw.decode("utf-8", "replace")
        for segment in text.split("\r") if "\r" in text else (text,):
            if segment and not segment.isspace():
                self.lines += 1
                self._slow(number, segment)

    def _slow(self, number: int, text: str) -> None:
        line = parse(text)
        if line.rank is not None and (line.values or line.step is not None):
            self.ranks[line.rank] += 1
            if self.keep_rank is None:
                self.keep_rank = line.rank.encode()
            if line.rank.encode() != self.keep_rank:
                self.keeper.offer(number, text, self.last_step)
                return
        if _SUMMARY in line.body:
            self.keeper.offer(number, text, self.last_step)
            return
        names = [self._name(v.key, v.unit, line.eval) for v in line.values]
        pairs = [(n, v) for n, v in zip(names, line.values) if n is not None]
        step = self._step_of(number, text, line, pairs)
        if step is None or not pairs:
            self.keeper.offer(number, text, self.last_step)
            return
        layout = Layout(tuple(n[0] for n, _ in pairs), tuple(n[1] for n, _ in pairs))
        values = [v.text.replace(",", "") for _, v in pairs]
        self.table.add_row(number, step, line.time, layout, values)
        self.last_row = number
        self.step_lines += line.step is not None
        self.shapes[layout.names] += line.step is not None
        if line.step is not None:
            self._learn(text, line, layout, [v for _, v in pairs])

    def _step_of(self, number: int, text: str, line: Line, pairs: list[Any]) -> int | None:
        if line.step is not None:
            before = self.last_step
            self.last_step = self._step(line.step, line.bar)
            if before is not None and self.last_step < before:
                self.resumes += 1
            if not pairs:
                self._near("a step counter without metrics", number, text)
            return self.last_step
        if not pairs:
            return None
        evals = all(n[0].startswith("eval/") for n, _ in pairs)
        if self.last_step is not None and (line.record or evals):
            return self.last_step
        if line.body.lstrip().startswith("{"):
            self.ordinal += 1
            return self.ordinal
        self._near("metrics without a step counter", number, text)
        return None

    def _step(self, raw: int, bar: bool) -> int:
        """The global step of a counter; a bar that restarts after reaching its total starts a new epoch."""
        if not bar:
            return raw
        offset, last, total = self.bar or (0, 0, 0)
        if raw < last and last >= total > 0:
            offset += total
        self.bar = (offset, raw, max(total, last, raw))
        return offset + raw

    def _name(self, key: str, unit: str, eval_line: bool) -> tuple[str, float] | None:
        cache = (key, unit, eval_line)
        if cache not in self.names:
            raw = key_name(key, unit)
            if raw is None:
                self.names[cache] = None
            elif raw in _OWN:
                self.names[cache] = _OWN[raw]
            else:
                found = metric(raw, "eval" if eval_line else None)
                self.names[cache] = (found.name, found.scale * MAGNITUDE.get(unit, 1.0))
        return self.names[cache]

    def _near(self, kind: str, number: int, text: str) -> None:
        count, first, sample = self.near.get(kind, (0, number, text.strip()[:100]))
        self.near[kind] = (count + 1, first, sample)

    def _learn(self, text: str, line: Line, layout: Layout, values: list[Any]) -> None:
        """Make `line` the template of its shape when the template reads it back to the same numbers."""
        shape = text.encode().translate(None, b"0123456789")
        if shape in self.templates or len(self.templates) >= MAX_TEMPLATES:
            return
        try:
            template: Template | None = Template(text, line, [v.token for v in values], layout)
        except ValueError:
            template = None
        if template is not None and not _same(template, text, line, values):
            template = None
        self.templates[shape] = template

    def result(self) -> ImportedRun:
        columns, rejected = self.table.build_columns()
        meta: dict[str, Any] = {"confidence": round(self.step_lines / self.lines, 3) if self.lines else 0.0}
        if self.shapes:
            meta["key_consistency"] = round(self.shapes.most_common(1)[0][1] / max(1, self.step_lines), 3)
        warnings = list(self.warnings)
        if len(self.ranks) > 1:
            kept = (self.keep_rank or b"").decode()
            others = ", ".join(r for r in sorted(self.ranks, key=int) if r != kept)
            warnings.append(f"{self.path}: lines of several ranks are interleaved; read rank {kept}'s "
                            f"(the first seen), left out ranks {others}")
            meta["rank"] = int(kept or 0)
        if self.ordinal:
            warnings.append(f"{self.path}: {self.ordinal} metric records carry no step counter; numbered 1, 2, 3 … "
                            "in file order (the trainer's own steps are a multiple of these)")
        if self.resumes:
            meta["resumes"] = self.resumes
        if not columns.names:
            meta["closest"] = self.closest()
        warnings += describe(rejected, lambda line: f"{self.path}:{line}")
        return ImportedRun(self.path, NAME, None, meta, warnings, self.keeper.lines(), columns=columns)

    def closest(self) -> str:
        """The shape nearest to a step line that this log showed, with its first line, for a 0-step report."""
        if not self.near:
            return "no line with a step counter or a `key value` metric"
        kind, (count, first, sample) = max(self.near.items(), key=lambda item: item[1][0])
        return f"{kind} ({count} lines, first at line {first}: {sample!r})"


def _same(template: Template, text: str, line: Line, values: list[Any]) -> bool:
    m = template.match(text.encode())
    if m is None:
        return False
    groups = m.groups()
    read = [groups[i].decode() for i in template.values]
    stamp = template.time is None or stamp_seconds(groups[template.time]) == line.time
    return stamp and read == [v.text for v in values] and int(groups[template.step].replace(b",", b"")) == line.step


def zero_steps(run: ImportedRun) -> str:
    """What `diagnose` says of a log from which no training step was read."""
    closest = run.meta.get("closest")
    if closest is None:
        closest = _scan(Path(run.path))
    return f"read 0 training steps from {run.path} ({run.format}); closest shape seen: {closest}"


def _scan(path: Path) -> str:
    try:
        return ConsoleImporter().read(path).meta.get("closest", "none")
    except Exception:  # noqa: BLE001 — a binary or unreadable file: there is no shape to name
        return "none (not a text log)"


def record_values(text: str) -> dict[str, float] | None:
    """The metrics of a record line that carries no step (a dict repr such as the HF Trainer prints),
    in our names and units; None when it has none or is a run summary."""
    if _SUMMARY in text:
        return None
    reader = ConsoleReader("")
    line = parse(text)
    out: dict[str, float] = {}
    for value in line.values:
        found = reader._name(value.key, value.unit, line.eval)
        number = to_float(value.text.replace(",", ""))
        if found is not None and number is not None:
            out[found[0]] = number * found[1]
    return out or None


def console_fallback(path: Path, run: ImportedRun) -> ImportedRun:
    """`run` (read by a dedicated text importer) or, when it holds no step, what the general reader reads.
    A textlog run read from progress bars alone (a checkpoint-loading bar in a log of another shape) is
    compared with the general reader's, and the one with more steps is kept."""
    bars_only = run.format == "textlog" and set(run.meta.get("dialects", {})) <= {"progress"}
    if run.columns.names and not bars_only:
        return run
    head = read_text(path)[:1 << 16]
    if not is_text(head):
        return run
    general = ConsoleImporter().read(path)
    if general.steps > run.steps:
        general.warnings.insert(0, f"{path}: the {run.format} reader read {run.steps} steps from it, the general "
                                   f"console reader {general.steps}: read as a console log")
        return general
    run.meta.setdefault("closest", general.meta.get("closest"))
    return run
