"""The reader behind `console.py`: runs of lines of one shape at once (by tokens, `console_tokens.py`,
else by a regex, `console_fast.py`), every other line through the full line parser (`console_line.py`),
with the state a console log needs: the last step (for record lines), the kept rank, resumes, bar epochs,
and the near-misses that name the closest shape of a log read to 0 steps.
"""

from __future__ import annotations

from collections import Counter
from itertools import accumulate, compress, count, groupby
from operator import add
from typing import TYPE_CHECKING, Any, NamedTuple

from stethoscope.importers import console_arrow, console_tokens
from stethoscope.importers.base import Columns, ImportedRun
from stethoscope.importers.console_cycles import find_cycle
from stethoscope.importers.console_fast import Template, reads_back
from stethoscope.importers.console_line import ANSI, MAGNITUDE, NUMBER, Line, key_name, parse
from stethoscope.importers.loglines import LineKeeper
from stethoscope.importers.names import metric
from stethoscope.importers.table import Layout, PointTable, Rejected, describe
from stethoscope.records import STEP_TIME

if TYPE_CHECKING:
    from stethoscope.importers.coded import CodedColumns

NAME = "console"
MAX_TEMPLATES = 4096
CHUNK_LINES = 16384
ARROW_CHUNK_LINES = 1 << 18  # pyarrow reads a run this many lines at a time (its own threads split them further)
CODED_ROWS = 256  # a run of this many lines read at once becomes arrays (fewer: lists, cheaper to make)
# Cumulative clocks and running averages that the resolver would take for a step time (modded-nanogpt).
_OWN = {"step avg (ms)": ("perf/step_avg_s", 1e-3), "train time (ms)": ("perf/train_time_s", 1e-3),
        "training time (ms)": ("perf/train_time_s", 1e-3), "step avg (s)": ("perf/step_avg_s", 1.0),
        "train time (s)": ("perf/train_time_s", 1.0)}
CLOCK = "perf/train_time_s"
SUMMARY = "train_runtime"  # the HF Trainer's end-of-run summary dict: not a step


class _Shape(NamedTuple):
    """What the first line of a shape taught: its regex template and token plan (either may be None)."""

    template: Template | None
    plan: console_tokens.Plan | None
    layout: Layout
    own_step: bool  # the line carries its step counter; else it is a record of the step before it
    bar: bool
    is_dict: bool


class ConsoleReader:
    """Reads the lines of one console log; `result()` builds the ImportedRun."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.parts: list[PointTable | Columns | CodedColumns] = [PointTable()]  # in log order: rows, blocks
        self.keeper = LineKeeper()
        self.templates: dict[bytes, _Shape | None] = {}
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
        self.use_arrow: bool | None = None  # pyarrow reads long runs (console_arrow); None: not looked up yet

    def feed(self, data: bytes) -> None:
        """Read a whole log (ANSI codes may stay in it): runs of lines of one shape at once, the others one
        by one."""
        lines = data.split(b"\n")
        shapes = shape_of(data).split(b"\n")
        offsets = [0, *map(add, accumulate(map(len, lines)), count(1))]  # where each line starts in `data`
        runs: list[tuple[bytes, int, int]] = []  # (shape, first line, end), 0-based
        for shape, run in groupby(shapes):
            start = runs[-1][2] if runs else 0
            runs.append((shape, start, start + len(list(run))))
        at = 0
        while at < len(runs):
            cycle = find_cycle(runs, at, self.templates)
            if cycle is not None:
                self._cycles(lines, data, offsets, runs[at: at + cycle[0] * cycle[1]], cycle[0])
                at += cycle[0] * cycle[1]
                continue
            alike = self._alike(runs, at)
            if alike - at > 1:
                self._runs(lines, data, offsets, runs[at:alike])
            else:
                self._run(lines, data, offsets, runs[at][1], runs[at][2], runs[at][0])
            at = alike
        last = lines[-1].decode("utf-8", "replace")
        if last.strip() and NUMBER.search(last) and self.last_row != len(lines):
            self.warnings.append(f"{self.path}:{len(lines)}: the last line looks cut short (no newline, no "
                                 "metrics read from it)")

    def _run(self, lines: list[bytes], data: bytes, offsets: list[int], start: int, end: int, shape: bytes) -> None:
        if shape not in self.templates and b"\r" not in shape:
            self.line(start + 1, lines[start])
            start += 1
        known = self.templates.get(shape)
        if known is None or start >= end:
            for i in range(start, end):
                self.line(i + 1, lines[i])
            return
        arrow = known.plan is not None and end - start >= console_arrow.MIN_LINES and self._arrow()
        step = ARROW_CHUNK_LINES if arrow else CHUNK_LINES
        for a in range(start, end, step):
            b = min(a + step, end)
            if arrow:
                read = console_arrow.read(known.plan, data[offsets[a]:offsets[b]], b - a,  # type: ignore[arg-type]
                                          self.keep_rank)
                if read is not None and self._block(known, a + 1, b - a, read):
                    continue
            for c in range(a, b, CHUNK_LINES):  # chunks: token lists of a few MB, not of the whole file
                d = min(c + CHUNK_LINES, b)
                read = None
                if known.plan is not None:
                    tokens = data[offsets[c]:offsets[d]].translate(console_tokens.TOKENS).split()
                    read = console_tokens.read(known.plan, tokens, d - c, self.keep_rank)
                if read is None or not self._block(known, c + 1, d - c, read):
                    self._by_regex(known.template, lines, c, d)

    def _arrow(self) -> bool:
        if self.use_arrow is None:
            self.use_arrow = console_arrow.available()
        return self.use_arrow

    def _alike(self, runs: list[tuple[bytes, int, int]], at: int) -> int:
        """The end of the runs from `at` on whose shapes are known and read by the same token plan into the
        same layout (a dict whose LR is written `1.2e-05` on one line and `0.00012` on the next): they are
        read as one run, not a few lines at a time."""
        known = self.templates.get(runs[at][0])
        if known is None or known.plan is None:
            return at + 1
        end = at + 1
        while end < len(runs) and (other := self.templates.get(runs[end][0])) is not None \
                and other[1:] == known[1:]:
            end += 1
        return end

    def _cycles(self, lines: list[bytes], data: bytes, offsets: list[int], runs: list[tuple[bytes, int, int]],
                period: int) -> None:
        """Cycles found by `console_cycles.find_cycle`, a chunk at a time: each position of the cycle read by its token plan
        over every cycle at once (a slice of the lines), the record lines given their header's step, and
        the points of a cycle in line order, as line-by-line reading gives them. A chunk that does not
        read goes line by line."""
        shapes = [self.templates[r[0]] for r in runs[:period]]
        names = tuple(name for shape in shapes for name in shape.layout.names)
        first = runs[0][1]
        per_chunk = max(1, CHUNK_LINES // period)
        for c0 in range(0, len(runs) // period, per_chunk):
            c1 = min(c0 + per_chunk, len(runs) // period)
            a, b = first + c0 * period, first + c1 * period
            reads = []
            for j, shape in enumerate(shapes):
                tokens = b"\n".join(lines[a + j: b: period]).translate(console_tokens.TOKENS).split()
                read = console_tokens.read(shape.plan, tokens, c1 - c0, self.keep_rank)  # type: ignore[arg-type]
                if read is None or read.kept != c1 - c0 or (j == 0 and read.steps is None):
                    break
                reads.append(read)
            if len(reads) != period:
                for shape_text, start, end in runs[c0 * period: c1 * period]:
                    self._run(lines, data, offsets, start, end, shape_text)
                continue
            steps = reads[0].steps
            self.lines += b - a
            for read in reads:
                for rank in read.ranks:
                    self.ranks[rank.decode()] += 1
            self._points(names, steps, [column for read in reads for column in read.values], reads[0].times)
            self.last_row = b
            self.resumes += console_arrow.backwards(steps) + (self.last_step is not None and steps[0] < self.last_step)
            self.last_step = steps[-1]
            self.step_lines += len(steps)
            self.shapes[shapes[0].layout.names] += len(steps)

    def _runs(self, lines: list[bytes], data: bytes, offsets: list[int], runs: list[tuple[bytes, int, int]]) -> None:
        """Runs of shapes read alike (`_alike`), by tokens a chunk at a time; a chunk that does not read
        goes back to its runs, each read as it would be alone."""
        known = self.templates[runs[0][0]]
        arrow = runs[-1][2] - runs[0][1] >= console_arrow.MIN_LINES and self._arrow()
        step = ARROW_CHUNK_LINES if arrow else CHUNK_LINES
        for a in range(runs[0][1], runs[-1][2], step):
            b = min(a + step, runs[-1][2])
            if arrow:  # alike shapes differ only inside numbers: the same fields, when it reads at all
                read = console_arrow.read(known.plan, data[offsets[a]:offsets[b]], b - a,  # type: ignore[arg-type]
                                          self.keep_rank)
            else:
                tokens = data[offsets[a]:offsets[b]].translate(console_tokens.TOKENS).split()
                read = console_tokens.read(known.plan, tokens, b - a, self.keep_rank)  # type: ignore[arg-type]
            if read is None or not self._block(known, a + 1, b - a, read):
                for shape, start, end in runs:
                    if start < b and end > a:
                        self._run(lines, data, offsets, max(start, a), min(end, b), shape)

    def _by_regex(self, template: Template | None, lines: list[bytes], start: int, end: int) -> None:
        """Lines start..end (0-based) by the shape's regex, each line alone when the run does not fit it."""
        if template is None:
            for i in range(start, end):
                self.line(i + 1, lines[i])
            return
        rows = template.rows(lines[start:end])
        if rows is None or not self._rows(template, start + 1, rows):  # a line only looks alike
            for i in range(start, end):
                m = template.match(lines[i])
                if not (m and self._rows(template, i + 1, [m.groups()])):
                    self.line(i + 1, lines[i])

    def _block(self, known: _Shape, first: int, count: int, read: console_tokens.Read) -> bool:
        """Add a run read by tokens as a block of points; False when its lines' steps are not known here."""
        if console_arrow.is_arrays(read) and (known.bar or read.kept < CODED_ROWS):
            read = console_arrow.as_lists(read)
        steps = read.steps
        if steps is not None and known.bar:
            steps = [self._step(s, True) for s in steps]
        elif steps is None and self.last_step is not None:
            steps = [self.last_step] * read.kept
        elif steps is None and known.is_dict:
            steps = list(range(self.ordinal + 1, self.ordinal + 1 + read.kept))
            self.ordinal += read.kept
        if steps is None:
            return False
        self.lines += count
        for rank in read.ranks:
            self.ranks[rank.decode()] += 1
        if len(steps):
            self._points(known.layout.names, steps, read.values, read.times)
            self.last_row = first + count - 1
        if known.own_step and len(steps):
            self.resumes += console_arrow.backwards(steps) + (self.last_step is not None and steps[0] < self.last_step)
            self.last_step = int(steps[-1])
            self.step_lines += len(steps)
            self.shapes[known.layout.names] += len(steps)
        return True

    def _points(self, names: tuple[str, ...], steps: list[int], values: list[list[float]],
                times: list[float] | None) -> None:
        """Append a block of points: a long run as arrays (a part of its own), a short one to the last
        block part of lists (a new one after rows), column-wise."""
        if len(steps) >= CODED_ROWS:
            # numpy: loaded when a log is read, not when the package is imported
            from stethoscope.importers.coded import rows_of

            block = rows_of(names, steps, values, times)
            if block is not None:
                if isinstance(self.parts[-1], PointTable) and not len(self.parts[-1]):
                    self.parts.pop()
                self.parts.append(block)
                return
        last = self.parts[-1]
        if not isinstance(last, Columns):
            if isinstance(last, PointTable) and not len(last):
                self.parts.pop()
            last = Columns.empty()
            self.parts.append(last)
        last.add_rows(names, steps, values, times)

    def _table(self) -> PointTable:
        """The point table that takes the next rows (a new one after a block of points)."""
        if not isinstance(self.parts[-1], PointTable):
            self.parts.append(PointTable())
        return self.parts[-1]  # type: ignore[return-value]

    def _rows(self, t: Template, first: int, rows: list[tuple[bytes, ...]]) -> bool:
        """Add regex rows; False (and nothing added) when a step is not a whole number."""
        keep, steps, values, times = t.columns(rows, self.keep_rank)
        try:
            ints = list(map(int, steps))
        except ValueError:
            return False
        self.lines += len(rows)
        if t.rank is not None:
            for rank, count in Counter(r[t.rank] or r[t.rank + 1] for r in rows).items():
                self.ranks[rank.decode()] += count
        origins: Any = range(first, first + len(rows))
        if keep is not None:
            origins = list(compress(origins, keep))
        if t.bar:
            ints = [self._step(s, True) for s in ints]
        if not ints:
            return True
        self.resumes += console_arrow.backwards(ints) + (self.last_step is not None and ints[0] < self.last_step)
        self.last_step = ints[-1]
        self._table().add_columns(t.layout, list(origins), ints, values, times)
        self.step_lines += len(ints)
        self.shapes[t.layout.names] += len(ints)
        self.last_row = origins[-1]
        return True

    def line(self, number: int, raw: bytes) -> None:
        """Read one physical line (tqdm's `\\r`-separated updates one by one)."""
        text = raw.decode("utf-8", "replace")
        for segment in text.split("\r") if "\r" in text else (text,):
            clean = ANSI.sub("", segment) if "\x1b" in segment else segment
            if clean and not clean.isspace():
                self.lines += 1
                self._slow(number, clean, segment)

    def _slow(self, number: int, text: str, original: str) -> None:
        """Read one line segment through the full parser; `text` is `original` without ANSI codes."""
        line = parse(text)
        if line.rank is not None and (line.values or line.step is not None):
            self.ranks[line.rank] += 1
            if self.keep_rank is None:
                self.keep_rank = line.rank.encode()
            if line.rank.encode() != self.keep_rank:
                self.keeper.offer(number, text, self.last_step)
                return
        if SUMMARY in line.body:
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
        self._table().add_row(number, step, line.time, layout, values)
        self.last_row = number
        self.step_lines += line.step is not None
        self.shapes[layout.names] += line.step is not None
        self._learn(text, original, line, layout, [v for _, v in pairs])

    def _step_of(self, number: int, text: str, line: Line, pairs: list[Any]) -> int | None:
        if line.step is not None:
            before = self.last_step
            self.last_step = self._step(line.step, line.bar)
            if before is not None and self.last_step < before:
                self.resumes += 1
            if not pairs:
                self._near("a step counter without metrics", number, text)
            return self.last_step
        if not pairs or (line.body.lstrip().startswith("{") and not has_loss(n for n, _ in pairs)):
            return None  # a dict without a loss is a config, not a metrics record
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

    def _learn(self, text: str, original: str, line: Line, layout: Layout, values: list[Any]) -> None:
        """Make `line` the template and token plan of its shape, each only when it reads the line back to
        the same numbers. The regex template needs a line without ANSI codes; the token plan does not."""
        shape = shape_of(original.encode())
        if shape in self.templates or len(self.templates) >= MAX_TEMPLATES:
            return
        template: Template | None = None
        if line.step is not None and text == original:
            try:
                template = Template(text, line, [v.token for v in values], layout)
            except ValueError:
                template = None
            if template is not None and not reads_back(template, text, line, values):
                template = None
        self.templates[shape] = _Shape(template, console_tokens.plan_of(text, original, line, layout, values), layout,
                                       line.step is not None, line.bar, line.body.lstrip().startswith("{"))

    def result(self) -> ImportedRun:
        # numpy: loaded when a log is read, not when the package is imported
        from stethoscope.importers.coded import join

        parts: list[Any] = [Columns.empty()]  # a first part of lists: extended in place, as it always was
        rejected: list[Rejected] = []
        for part in self.parts:
            if isinstance(part, PointTable):
                part, more = part.build_columns()
                rejected += more
            parts.append(part)
        columns = join(parts)
        used = {found[0] for found in self.names.values() if found}
        if CLOCK in used and STEP_TIME not in used:
            columns = Columns(*columns)  # the list form: step times are appended to it
            _step_time_from_clock(columns)
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
        if not columns.size:
            meta["closest"] = self.closest()
        warnings += describe(rejected, lambda line: f"{self.path}:{line}")
        return ImportedRun(self.path, NAME, None, meta, warnings, self.keeper.lines(), columns=columns)

    def closest(self) -> str:
        """The shape nearest to a step line that this log showed, with its first line, for a 0-step report."""
        if not self.near:
            return "no line with a step counter or a `key value` metric"
        kind, (count, first, sample) = max(self.near.items(), key=lambda item: item[1][0])
        return f"{kind} ({count} lines, first at line {first}: {sample!r})"


def _step_time_from_clock(columns: Columns) -> None:
    """A log that prints only a cumulative training clock (modded-nanogpt's `train_time:…ms`) gets step
    times from its differences, per step between consecutive records; appended after the logged points."""
    last: tuple[int, float] | None = None
    for name, step, value, time in zip(*columns):
        if name != CLOCK:
            continue
        if last is not None and step > last[0] and value >= last[1]:
            for column, item in zip(columns, (STEP_TIME, step, (value - last[1]) / (step - last[0]), time)):
                column.append(item)
        last = (step, value)


def shape_of(text: bytes) -> bytes:
    """The shape of a line (or of many): its text without digits, signs and exponent letters, so that
    `1.5e-05` and `0.00012` (how Python prints an LR of either size) or `-0.5` and `0.5` are one shape,
    read as one run. Words lose their e's alike on every line; lines this merges whose tokens still
    differ fail the token plan's check and are read one by one."""
    return text.translate(None, b"0123456789eE+-")


def has_loss(names: Any) -> bool:
    """Whether any of the (name, scale) pairs is a loss: what makes a dict a metrics record."""
    return any(name == "train/loss" or name.endswith("/loss") for name, _ in names)
