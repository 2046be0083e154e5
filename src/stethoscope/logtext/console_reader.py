"""The reader behind `console.py`. A long run of lines of one shape is found without touching its lines
one by one (`console_walk.py`, `console_runs.py`) and read at once (pyarrow: `console_arrow.py`; tokens: `console_tokens.py`; else a
regex: `console_fast.py`); between long runs, a window of lines is grouped by shape and interleaved shapes
read a shape at a time (`console_segment.py`); every other line goes through the full line parser
(`console_line.py`). The state a console log needs is kept here: the last step (for record lines), the kept
rank, resumes, bar epochs, and the near-misses that name the closest shape of a log read to 0 steps.
"""

from __future__ import annotations

from collections import Counter
from itertools import compress
from typing import TYPE_CHECKING, Any

from stethoscope.logtext import console_arrow, console_tokens, linescan
from stethoscope.logtext.columns import Columns, ImportedRun
from stethoscope.logtext.config_dump import config_dump
from stethoscope.logtext.console_epochs import HEAD, EpochCounter, EpochHeads, RoundedSteps, bar_step, epoch_step
from stethoscope.logtext.console_fast import Template
from stethoscope.logtext.console_line import ANSI, NUMBER, Line, has_loss, parse
from stethoscope.logtext.console_names import HELD_OUT, Names, distinct, ordinal_steps, resolve
from stethoscope.logtext.console_restated import Restated
from stethoscope.logtext.console_runs import Lines, first_where, pieces, shape_of
from stethoscope.logtext.console_shape import Shape, learn
from stethoscope.logtext.console_walk import walk
from stethoscope.logtext.eval_lines import an_evaluation, estimates, eval_values
from stethoscope.logtext.loglines import LineKeeper
from stethoscope.logtext.summaries import summary
from stethoscope.logtext.table import Layout, PointTable
from stethoscope.detect.names import CROSS_ENTROPY
from stethoscope.records import LOSS

if TYPE_CHECKING:
    from stethoscope.logtext.coded import CodedColumns, RowBlock

NAME = "console"
MAX_TEMPLATES = 4096
CHUNK_LINES = 16384
ARROW_CHUNK_BYTES = 1 << 24  # pyarrow reads a run this many bytes at a time (memory the allocator reuses)
NATIVE_PIECE_BYTES = 1 << 22  # the scanner's columns: smaller pieces, so that two threads share a run
MIN_STRETCH = 32  # interleaved shapes: read a shape at a time from this many lines on
CODED_ROWS = 256  # a run of this many lines read at once becomes arrays (fewer: lists, cheaper to make)


class ConsoleReader:
    """Reads the lines of one console log; `result()` builds the ImportedRun."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.parts: list[PointTable | Columns | CodedColumns | RowBlock] = [PointTable()]  # in log order: rows, blocks
        self.keeper = LineKeeper()
        self.templates: dict[bytes, Shape | None] = {}
        self.names: Names = {}
        self.warnings: list[str] = []
        self.last_step: int | None = None
        self.keep_rank: bytes | None = None
        self.ranks: Counter[str] = Counter()
        self.bar: tuple[int, int, int] | None = None  # (offset, last raw counter, total) of a per-epoch bar
        self.ordinal = 0
        self.epoch_row = False  # the line read last took its epoch for its step (`epoch_step`)
        self.headed = 0  # records numbered by the epoch a head line began (`EpochHeads.after`)
        self.loss_steps = 0  # records with a train loss at a step counter, theirs or the line's before (then no
        # epoch is a step: CNTK's `Finished Epoch[2 of 100]: [Training] loss = ..` is the epoch's summary)
        self.counts: list[tuple[int, int | None, int, int]] = []  # a sample counter's (record, epoch, count, total)
        self.restated = Restated()  # a record printed again under a sample counter (TFLearn's)
        self.epochs = EpochCounter()
        self.heads = EpochHeads()  # lines that print only an epoch, and the records after them
        self.rounds = RoundedSteps()
        self.last_row = 0
        self.near: dict[str, tuple[int, int, str]] = {}  # kind → (count, first line, its text)
        self.lines = self.step_lines = self.resumes = 0
        self.shapes: Counter[tuple[str, ...]] = Counter()
        self.window_bytes = 0  # console_walk's window of shapes (0: none yet)
        self.use_arrow: bool | None = None  # pyarrow reads long runs (console_arrow); None: not looked up yet

    def feed(self, data: bytes) -> None:
        """Read a whole log (ANSI codes may stay in it): a long run of lines of one shape at once (found by
        comparing shapes: no Python per line, the lines not even split), the lines between long runs a window
        at a time (`_window`); `console_walk`."""
        self._data = data
        at = walk(self, data)
        self._data = b""
        last = data[data.rfind(b"\n") + 1:].decode("utf-8", "replace")
        if last.strip() and NUMBER.search(last) and self.last_row != at:
            self.warnings.append(f"{self.path}:{at}: the last line looks cut short (no newline, no "
                                 "metrics read from it)")

    def _window(self, lines: Lines, ids: Any, kinds: list[bytes]) -> None:
        """`lines`, whose shapes are `kinds[ids]`: stretches of lines whose shapes all have token
        plans are read a shape at a time (`_stretch`), every other run of a shape by `_run`."""
        import numpy as np

        first = lines.first
        planned = np.fromiter(map(self._planned, kinds), dtype=bool, count=len(kinds))
        at = 0
        while at < len(ids):
            kind = int(ids[at])
            if planned[kind]:
                end = first_where(ids, at, lambda chunk: ~planned[chunk])
                self._stretch(lines, first + at, first + end, ids[at:end], kinds)
            else:
                end = first_where(ids, at, lambda chunk: chunk != kind)
                self._run(first + at, first + end, kinds[kind], *lines.span(first + at, first + end), lines)
                planned[kind] = self._planned(kinds[kind])
            at = end

    def _planned(self, shape: bytes) -> bool:
        known = self.templates.get(shape)
        return known is not None and known.plan is not None and b"\r" not in shape

    def _stretch(self, lines: Lines, start: int, end: int, ids: Any, kinds: list[bytes]) -> None:
        """Lines start..end, of shapes that all have token plans: one run through `_run`; several shapes
        interleaved read a shape at a time and merged in line order (`console_segment`); what does not
        read that way goes run by run."""
        import numpy as np

        if (ids == ids[0]).all():
            self._run(start, end, kinds[int(ids[0])], *lines.span(start, end), lines)
            return
        if end - start >= MIN_STRETCH and self._interleaved(lines, start, end, ids, kinds):
            return
        cuts = [0, *(np.flatnonzero(ids[1:] != ids[:-1]) + 1).tolist(), len(ids)]
        for a, b in zip(cuts, cuts[1:]):
            self._run(start + a, start + b, kinds[int(ids[a])], *lines.span(start + a, start + b), lines)

    def _interleaved(self, lines: Lines, start: int, end: int, ids: Any, kinds: list[bytes]) -> bool:
        """Several shapes interleaved, read a shape at a time and merged (`console_segment`), then the
        reader's state moved on as line-by-line reading would; False (nothing changed) when they do not read."""
        from stethoscope.logtext import console_segment

        groups = console_segment.read_groups(self.templates, lines, start, ids, kinds, self.keep_rank,
                                             self._arrow)
        if groups is None:
            return False
        done = console_segment.combine(groups, self.last_step, self.bar, self.ordinal)
        if done is None:
            return False
        epochal = [known for known in map(self.templates.get, kinds) if known is not None and known.per_epoch]
        if epochal and not self._epochs_read(epochal[0], done.steps):
            return False  # a counter within epochs that restarted: line by line
        self.lines += end - start
        for group in groups:
            for rank in group.read.ranks:
                self.ranks[rank.decode()] += 1
        if done.points is not None:
            if isinstance(self.parts[-1], PointTable) and not len(self.parts[-1]):
                self.parts.pop()
            self.parts.append(done.points)
            self.last_row = end
        self.bar, self.ordinal = done.bar, done.ordinal
        if done.steps.size:
            steps = done.steps
            self.resumes += console_arrow.backwards(steps) + (self.last_step is not None and steps[0] < self.last_step)
            self.last_step = int(steps[-1])
            self.step_lines += int(steps.size)
            for names, count in done.per_layout:
                self.shapes[names] += count
        return True

    def _run(self, start: int, end: int, shape: bytes, q: int, q_end: int, lines: Lines | None = None) -> None:
        """Lines start..end (0-based) of one shape, at data[q:q_end]: by pyarrow at once, else by tokens a
        chunk at a time, else by the shape's regex, else line by line; a shape not seen before is learnt
        from its first line."""
        data = self._data
        if shape not in self.templates and b"\r" not in shape:
            first = data.find(b"\n", q, q_end)
            self.line(start + 1, data[q: first if first >= 0 else q_end])
            start, q = start + 1, (first + 1 if first >= 0 else q_end)
        known = self.templates.get(shape)
        if start >= end:
            return
        native = linescan.available()
        if known is not None and known.plan is not None and end - start >= console_arrow.MIN_LINES and \
                (native or self._arrow()):
            plan, keep_rank, view = known.plan, self.keep_rank, memoryview(data)
            if native:  # the scanner's columns release the GIL: pieces are read two at a time
                reads = linescan.ahead(lambda piece: console_tokens.read_raw(plan, view[piece[0]:piece[1]], None,
                                                                             keep_rank),
                                       pieces(data, q, q_end, NATIVE_PIECE_BYTES))
            else:
                reads = ((piece, console_arrow.read(plan, data[piece[0]:piece[1]], None, keep_rank))
                         for piece in pieces(data, q, q_end, ARROW_CHUNK_BYTES))
            for (_, cut), read in reads:  # as many rows as lines
                if read is None or start + read.rows > end or not self._block(known, start + 1, read.rows, read):
                    break
                start, q = start + read.rows, cut
            if start >= end:
                return
        # a run's lines are split only if a chunk or the regex needs them (their span is known: q..q_end)
        if lines is None or lines.first > start:
            lines = Lines(data, start, q, q_end, count=end - start)
        if known is None:
            for i in range(start, end):
                self.line(i + 1, lines[i])
            return
        for c in range(start, end, CHUNK_LINES):  # chunks: token lists of a few MB, not of the whole file
            d = min(c + CHUNK_LINES, end)
            read = None
            if known.plan is not None:
                read = console_tokens.read_raw(known.plan, data[slice(*lines.span(c, d))], d - c, self.keep_rank)
            if read is None or not self._block(known, c + 1, d - c, read):
                self._by_regex(known.template, lines, c, d)

    def _arrow(self) -> bool:
        if self.use_arrow is None:
            self.use_arrow = console_arrow.available()
        return self.use_arrow

    def _by_regex(self, template: Template | None, lines: Lines, start: int, end: int) -> None:
        """Lines start..end (0-based) by the shape's regex, each line alone when the run does not fit it."""
        if template is None:
            for i in range(start, end):
                self.line(i + 1, lines[i])
            return
        rows = template.rows(lines.slice(start, end))
        if rows is None or not self._rows(template, start + 1, rows):  # a line only looks alike
            for i in range(start, end):
                m = template.match(lines[i])
                if not (m and self._rows(template, i + 1, [m.groups()])):
                    self.line(i + 1, lines[i])

    def _block(self, known: Shape, first: int, count: int, read: console_tokens.Read) -> bool:
        """Add a run read by tokens as a block of points; False when its lines' steps are not known here."""
        if console_arrow.is_arrays(read) and read.kept < CODED_ROWS:
            read = console_arrow.as_lists(read)
        steps = read.steps
        if known.progress:
            return False
        if steps is not None and not self._epochs_read(known, steps):
            return False
        if steps is not None and known.bar:
            from stethoscope.logtext.console_segment import bar_steps

            steps, self.bar = bar_steps(steps, self.bar)
            steps = steps if console_arrow.is_arrays(read) else steps.tolist()
        elif steps is None and self.last_step is not None:
            steps = [self.last_step] * read.kept
        elif steps is None and known.is_dict:
            steps, self.ordinal = ordinal_steps(known.layout.names, read.kept, self.ordinal)
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
            from stethoscope.logtext.coded import rows_of

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
        self.heads.continued(number, line)
        held = self.heads.held(number, line)  # `Training epoch: 3` and its indented lines: epoch 3's record
        if summary(line.body) or held == HEAD or config_dump(line.body):
            self.keeper.offer(number, text, self.last_step)
            return
        names = [resolve(self.names, v.key, v.unit, line.eval) for v in line.values]
        pairs = distinct([(n, v) for n, v in zip(names, line.values) if n is not None])
        if an_evaluation(pairs, line, self.loss_steps, self.shapes):  # (`eval_lines`)
            line.eval = True
            pairs = distinct([(n, v) for v in line.values if (n := resolve(self.names, v.key, v.unit, True))])
        pairs = eval_values(pairs, line, self.loss_steps, self.heads)
        pairs = estimates(pairs) if line.step is not None else pairs  # (nanoGPT's `step N: train loss ..`)
        self.restated.check(number, line, pairs)  # TFLearn's `.. -- iter: 06400/55000` (samples)
        step = self._step_of(number, text, line, pairs) if held is None else held
        if step is None or not pairs:
            self.keeper.offer(number, text, self.last_step)
            return
        layout = Layout(tuple(n[0] for n, _ in pairs), tuple(n[1] for n, _ in pairs))
        values = [v.text.replace(",", "") for _, v in pairs]
        self._table().add_row(number, step, line.time, layout, values)
        self.last_row = number
        self.restated.read(number, line.step, pairs)
        self.step_lines += line.step is not None
        counted = line.step is not None or line.record and self.last_step is not None  # (Coqui's `| > loss: ..`)
        self.loss_steps += counted and (LOSS in layout.names or CROSS_ENTROPY in layout.names)  # (OpenNMT's xent)
        self.shapes[layout.names] += line.step is not None
        if not self.epoch_row and held is None:
            self._learn(text, original, line, layout, [v for _, v in pairs])

    def _step_of(self, number: int, text: str, line: Line, pairs: list[Any]) -> int | None:
        self.epoch_row = False
        if line.step is not None:
            before = self.last_step
            # an evaluation's counter with no total, where the records count within epochs of a printed total, is the
            # run's step it ran at (JoeyNMT's `Validation result (greedy) at epoch 1, step 300:` among `Epoch: [0][100/773]`
            # records): as printed, and its epoch (numbered from 1, theirs from 0) is not the counter's
            bare = line.epoch is None or line.eval and line.total is None and self.epochs.totalled
            raw = line.step if bare else self.epochs.step(line.epoch, line.step, line.total)
            if line.rounded > 1:  # `step:4K` (its shape not learnt: a template reads it as 4)
                raw, self.epoch_row = self.rounds.step(raw, line.rounded, before), True
            self.last_step = self._step(raw, line.bar)
            if before is not None and self.last_step < before:
                self.resumes += 1
            if not pairs:
                self._near("a step counter without metrics", number, text)
            return self.last_step
        if not pairs or (line.body.lstrip().startswith("{") and not has_loss(n for n, _ in pairs)):
            return None  # a dict without a loss is a config, not a metrics record
        if line.progress:  # a sample counter: records numbered in file order (an eval dict after: its)
            self.ordinal += 1
            self.last_step = self.ordinal
            self.counts.append((self.ordinal, line.epoch, line.count or 0, line.total or 0))
            return self.ordinal
        evals = all(n[0].startswith(HELD_OUT) for n, _ in pairs)
        if self.last_step is not None and (line.record or evals):
            return self.last_step
        if line.body.lstrip().startswith("{"):
            (step,), self.ordinal = ordinal_steps([n[0] for n, _ in pairs], 1, self.ordinal)
            return step
        # records numbered by the heads of their epochs (nnU-Net's `Epoch 3`, then `train_loss -0.55`): a line that
        # prints an epoch beside a loss after them (CNTK's `Finished Epoch[1 of 100]: [Training] loss = ..`, another
        # tool's) is no record of the run's epochs
        epoch = epoch_step(pairs, line) if not self.loss_steps and not self.headed else None
        if epoch is None and not self.loss_steps:  # the epoch an `Epoch N` line alone began (nnU-Net's)
            epoch = self.heads.after(pairs, line)
            self.headed += epoch is not None
        if epoch is not None:  # one record an epoch, nothing finer printed: its step is the epoch (its shape
            self.last_step, self.epoch_row = epoch, True  # is not learnt: a template reads no epoch as a step)
            return epoch
        self._near("metrics without a step counter", number, text)
        return None

    def _epochs_read(self, known: Shape, steps: Any) -> bool:
        return not known.per_epoch or not len(steps) or self.epochs.reads(steps, self.last_step)

    def _step(self, raw: int, bar: bool) -> int:
        """The global step of a counter (a bar's: `bar_step`)."""
        if not bar:
            return raw
        step, self.bar = bar_step(self.bar, raw)
        return step

    def _near(self, kind: str, number: int, text: str) -> None:
        count, first, sample = self.near.get(kind, (0, number, text.strip()[:100]))
        self.near[kind] = (count + 1, first, sample)

    def _learn(self, text: str, original: str, line: Line, layout: Layout, values: list[Any]) -> None:
        """Make `line` the template and token plan of its shape (`console_shape.learn`)."""
        shape = shape_of(original.encode())
        if shape in self.templates or len(self.templates) >= MAX_TEMPLATES:
            return
        self.templates[shape] = learn(text, original, line, layout, values)

    def result(self) -> ImportedRun:
        from stethoscope.logtext.console_result import finish  # numpy: loaded when a log is read

        return finish(self)

    def closest(self) -> str:
        """The shape nearest to a step line that this log showed, with its first line, for a 0-step report."""
        if not self.near:
            return "no line with a step counter or a `key value` metric"
        kind, (count, first, sample) = max(self.near.items(), key=lambda item: item[1][0])
        return f"{kind} ({count} lines, first at line {first}: {sample!r})"
