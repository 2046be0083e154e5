"""Megatron-LM, Megatron-DeepSpeed, NeMo-Megatron and GPT-NeoX iteration logs.

`iteration N/ M | key: value | … |` records (GPT-NeoX puts `samples/sec` before `iteration`),
`validation loss at iteration N | lm loss value: … | lm loss PPL: … |`, `time (ms) | …` timers,
`… memory (MB) | …` lines, DeepSpeed `OVERFLOW!` lines, the argument dump, and whatever else the
job printed (tracebacks, NCCL/ECC errors, timestamped notes → `ImportedRun.lines`).

Choices (those that leave out or read a value in a way worth knowing are also explained in
`meta["notes"]` when they applied):
* Steps are the log's own iteration numbers.
* Rank prefixes (`[default7]:`) are stripped; a record hard-wrapped over several physical lines is
  re-joined; a record cut short keeps its complete fields and the last, unterminated one is dropped.
* A record without its `lm loss` field: Megatron leaves the loss out when the interval's average
  is not > 0 — either every iteration of the interval was skipped (fp16 overflow; nothing was
  summed) or the sum was NaN/Inf. So `train/loss_missing` = 1 always, and `train/loss` = NaN unless
  the record itself reports skipped iterations > 0 with nan iterations = 0 (then the loss is unknown,
  not NaN). Megatron-DeepSpeed always prints `skipped iterations: 0` (DeepSpeed skips on its own),
  so there a missing loss reads as NaN — which is what it was in the known cases.
* DeepSpeed `OVERFLOW! … reducing to Y` happens inside the step that the next iteration record
  reports: that record gets `train/skipped_iterations` = max(its own count, overflows seen) and,
  if it has no loss scale field, `amp/loss_scale` = Y. Overflows after the last record land on
  last step + 1.
* Skipped/nan iteration counters are written only when non-zero (zero is the norm and would double
  the points), `train/global_batch_size` only when it changes.
* `grad norm: 0.000` is what old Megatron-DeepSpeed printed under pipeline parallelism: when the
  log never shows a non-zero grad norm, those zeros are dropped (not a real zero).

Most lines of a big log go through the fast path (megatron_fast.py); this module is the general
parser that reads everything else and teaches the fast path each new record shape.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, BinaryIO

from stethoscope.logtext import linescan
from stethoscope.importers.base import Columns, ImportedRun
from stethoscope.logtext.loglines import LineKeeper, parse_timestamp, stamp_seconds, strip_rank
from stethoscope.importers.megatron_fast import (
    CHUNK_BYTES, STAMPED, Template, chunks, compile_template, line_count, shape,
)
from stethoscope.importers.megatron_fields import (
    AFTER_LOSS, COUNTER_KEYS, GLOBAL_BATCH, GLOBAL_BATCH_KEY, LOSS_MISSING, eval_name, field_name, number,
)
from stethoscope.importers.megatron_native import Shape, close_map, learn, mapped_blocks, read_scanned
from stethoscope.logtext.names import normalize
from stethoscope.importers.source import GZIP_ERRORS, check_file, is_text, open_log, read_error
from stethoscope.logtext.table import PointTable, Rejected, describe, gc_paused
from stethoscope.records import (
    CUDA_ALLOCATED, CUDA_PEAK, CUDA_RESERVED, DATA_WAIT, GRAD_NORM, LOSS, LOSS_SCALE, NAN_ITERS, SKIPPED,
)

if TYPE_CHECKING:
    from stethoscope.logtext.coded import CodedColumns, RowBlock

NAME = "megatron"
_ZERO_NORM = "grad/norm~zero"  # placeholder until we know whether the log ever printed a real norm
_MAX_WRAP = 8
_MAX_ARGS = 2000
NATIVE_CHUNK_BYTES = 1 << 20  # blocks for the line scanner: fewer calls, and a misfit line costs only itself

ITERATION = re.compile(r"iteration\s+(\d+)\s*/\s*(\d+)")
_SNIFF = re.compile(r"iteration\s+\d+\s*/\s*\d+\s*\|")
_EVAL_HEAD = re.compile(r"^\s*(valid\w*|test)\s+(?:loss|results?)\s+at\s+([^|]*)", re.IGNORECASE)
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_OVERFLOW = re.compile(rf"OVERFLOW!.*?[Aa]ttempted loss scale:\s*({_NUMBER}),?\s*reducing to\s*({_NUMBER})")
_EVAL_STEP = re.compile(r"iteration\s+(\d+)")
_TIMERS = re.compile(r"^\s*time \(ms\)\s*\|")
_MEMORY = re.compile(r"(?:after\s+(\d+)\s+iterations\)?\s+)?memory \(MB\)\s*\|", re.IGNORECASE)
_ARG = re.compile(r"^\s+(\w+) \.{2,} ?(.*)$")


class MegatronImporter:
    """Megatron-family iteration logs. `fast=False` turns the fast paths off, `native=False` the line
    scanner's (where it was built), and `chunk_bytes` sets their block size (for tests: the answers
    must not change)."""

    name = NAME

    def __init__(self, fast: bool = True, chunk_bytes: int | None = None, native: bool = True) -> None:
        self.fast = fast
        self.native = native
        self.chunk_bytes = chunk_bytes

    def sniff(self, path: Path, head: str) -> bool:
        return is_text(head) and _SNIFF.search(head) is not None

    def read(self, path: Path) -> ImportedRun:
        check_file(path)
        try:
            # Read as bytes, in chunks: decoding or holding a multi-GB log would cost more than parsing it.
            with open_log(path) as stream, gc_paused():
                native = self.fast and self.native and linescan.available()
                size = self.chunk_bytes or (NATIVE_CHUNK_BYTES if native else CHUNK_BYTES)
                log = linescan.mapped(str(path)) if native else None  # a big, plain, settled log: not copied
                if log is None:
                    return _Reader(path, self.fast, native).run(stream, size)
                try:
                    return _Reader(path, self.fast, native).run(stream, size, mapped_blocks(log, size))
                finally:
                    close_map(log)
        except (OSError, *GZIP_ERRORS) as exc:
            raise read_error(path, exc) from None


class _Record:
    """One iteration record being assembled from one or more physical lines."""

    def __init__(self, line: int, text: str) -> None:
        self.line = line
        self.parts = [text]

    @property
    def text(self) -> str:
        return " ".join(self.parts)

    @property
    def complete(self) -> bool:
        return self.parts[-1].rstrip().endswith("|")


class _Reader:
    def __init__(self, path: Path, fast: bool, native: bool = False) -> None:
        self.path = path
        self.use_fast = fast
        self.use_native = native  # the line scanner reads the records (megatron_native.py)
        self.table = PointTable()
        self.parts: list[PointTable | CodedColumns | RowBlock] = [self.table]  # in log order: tables of rows, blocks
        self.keeper = LineKeeper()
        self.warnings: list[str] = []
        self.meta: dict[str, Any] = {"dialect": "megatron"}
        self.notes: dict[str, str] = {}
        self.fields_seen: dict[str, None] = {}
        self.args: dict[str, str] = {}
        self.in_args = False
        self.last_step: int | None = None
        self.last_gbs: float | None = None
        self.pending_overflows = 0
        self.pending_scale: float | None = None
        self.norms_nonzero = 0
        self.norms_zero = 0
        self.partial: _Record | None = None
        self.template: Template | None = None
        self.templates: dict[tuple[Any, ...], Template] = {}
        self.native: Shape | None = None  # the template's shape for the line scanner
        self.raw: tuple[int, bytes] | None = None  # the line the general parser is reading, as bytes

    # -- the loop --------------------------------------------------------------------------------
    def run(self, stream: BinaryIO, chunk_bytes: int, blocks: Iterator[memoryview] | None = None) -> ImportedRun:
        """Read the log from `stream`, or for the line scanner from `blocks` where given (its mapped bytes)."""
        line = 0
        if self.use_native:
            for block, scan in linescan.scanned(blocks or linescan.blocks(stream, chunk_bytes)):
                read_scanned(self, block, scan, line)
                line += len(scan)
        else:
            for chunk in chunks(stream, chunk_bytes):
                newlines = chunk.count(b"\n")
                if not self._block(chunk, line, newlines):
                    self._lines(chunk.removesuffix(b"\n").split(b"\n"), line)
                line += line_count(chunk, newlines)
        self._finish_partial()
        self._flush_overflow(line)
        return self._result()

    def _block(self, chunk: bytes, line: int, newlines: int) -> bool:
        """Read the whole chunk at once when every line in it fits the current template."""
        template = self._template()
        if template is None:
            return False
        rows = template.findall(chunk)
        if len(rows) != newlines + 1:  # findall also gives the (empty) end after the last newline
            return False
        block = template.coded(rows, stamp_seconds)
        if block is None:
            self.table.add_block(line + 1, template.layout, rows, template.step_at, template.value_at,
                                 template.time_at, stamp_seconds)
        else:
            self._add_block(block)
        last = next((row[template.step_at] for row in reversed(rows) if row[template.step_at]), None)
        if last is not None:
            self.last_step = int(last)
        return True

    def _add_block(self, block: CodedColumns | RowBlock) -> None:
        """A block's points go after the rows read so far (parts ends with the table that rows go into)."""
        if len(self.table):
            self.table = PointTable()
            self.parts += [block, self.table]
        else:
            self.parts.insert(len(self.parts) - 1, block)

    def _lines(self, lines: list[bytes], line: int) -> None:
        add_row = self.table.add_row
        match, step, stamp, layout, groups = self._fast()
        last = None
        for index, raw in enumerate(lines, line + 1):
            if match is not None:
                m = match(raw)
                if m is not None:
                    last = m.group(step)
                    add_row(index, last, stamp_seconds(m.group(stamp)) if stamp else None, layout, m.group(*groups))
                    continue
            if last is not None:
                self.last_step, last = int(last), None
            self.raw = (index, raw)
            self._slow(index, raw.decode("utf-8", errors="replace").rstrip())
            match, step, stamp, layout, groups = self._fast()
        if last is not None:
            self.last_step = int(last)

    def _template(self) -> Template | None:
        """The template in force, or None where the general parser must read the next line."""
        if not self.use_fast or self.partial is not None or self.pending_overflows:
            return None
        return self.template

    def _fast(self) -> tuple[Any, int, int, Any, tuple[int, ...]]:
        """(match, step group, time group or 0, layout, value groups) of the line fast path; match is None
        when it is off."""
        template = self._template()
        if template is None:
            return None, 0, 0, None, ()
        return template.match, template.step, template.time, template.layout, template.groups

    def _slow(self, index: int, text: str) -> None:
        body = strip_rank(text)
        if self.partial is not None:
            if self._continues(body):
                self.partial.parts.append(body.strip())
                if self.partial.complete or len(self.partial.parts) >= _MAX_WRAP:
                    self._finish_partial()
                return
            self._finish_partial()
        if ITERATION.search(body) and "|" in body:
            self.in_args = False
            self.partial = _Record(index, body)
            if self.partial.complete:
                self._finish_partial()
            return
        self._other(index, text, body)

    def _continues(self, body: str) -> bool:
        stripped = body.strip()
        if not stripped or ITERATION.search(stripped) or _EVAL_HEAD.match(stripped) or _TIMERS.match(stripped):
            return False
        return "|" in stripped and parse_timestamp(stripped)[0] is None and "OVERFLOW" not in stripped

    def _other(self, index: int, text: str, body: str) -> None:
        head = _EVAL_HEAD.match(body)
        if head:
            self._eval_record(index, body, head)
        elif _TIMERS.match(body):
            self._timers(index, body)
        elif _MEMORY.search(body):
            self._memory(index, body)
        elif self._argument(body):
            return
        overflow = _OVERFLOW.search(body)
        if overflow:
            self.pending_overflows += 1
            self.pending_scale = float(overflow.group(2))
        if not head:
            self.keeper.offer(index, text, self.last_step)

    # -- iteration records -------------------------------------------------------------------------
    def _finish_partial(self) -> None:
        record, self.partial = self.partial, None
        if record is None:
            return
        fields, step, total, truncated, time = self._fields(record)
        if step is None:
            self.warnings.append(f"{self.path}:{record.line}: iteration record without a readable step")
            return
        if truncated:
            self.warnings.append(f"{self.path}:{record.line}: record cut short; its last, unterminated field "
                                 "was dropped")
        self.meta["total_iterations"] = total
        values = self._values(fields, record, truncated)
        self.table.add_values(record.line, step, time, values)
        self.last_step = step
        if self.use_fast and not truncated and len(record.parts) == 1:
            before = self.template
            self._learn(fields, values)
            self._learn_native(record, fields, before)

    def _fields(self, record: _Record) -> tuple[list[tuple[str, str]], int | None, int | None, bool, float | None]:
        """(key, value text) pairs, step, total iterations, whether cut short, and the record's time
        (Megatron-LM stamps `[YYYY-MM-DD HH:MM:SS] iteration …`)."""
        segments = record.text.split("|")
        truncated = not record.complete
        if truncated:
            segments = segments[:-1]
        fields: list[tuple[str, str]] = []
        step = total = time = None
        for segment in segments:
            it = ITERATION.search(segment)
            if it and step is None:
                step, total = int(it.group(1)), int(it.group(2))
                time = parse_timestamp(segment.strip())[0]
                fields.append(("iteration", STAMPED if time is not None else ""))
                continue
            key, sep, value = segment.rpartition(":")
            if sep and key.strip():
                fields.append((" ".join(key.split()), value.strip()))
        return fields, step, total, truncated, time

    def _values(self, fields: list[tuple[str, str]], record: _Record, truncated: bool) -> dict[str, float]:
        values: dict[str, float] = {}
        counts = {SKIPPED: 0.0, NAN_ITERS: 0.0}
        for key, text in fields:
            self.fields_seen.setdefault(key)
            parsed = number(text)
            if parsed is None:
                continue
            self._field(key.lower(), parsed, values, counts)
        self._loss_check(fields, values, counts, record, truncated)
        skipped = max(counts[SKIPPED], float(self.pending_overflows))
        if skipped > 0:
            values[SKIPPED] = skipped
        if counts[NAN_ITERS] > 0:
            values[NAN_ITERS] = counts[NAN_ITERS]
        if self.pending_scale is not None and LOSS_SCALE not in values:
            values[LOSS_SCALE] = self.pending_scale
        self.pending_overflows, self.pending_scale = 0, None
        return values

    def _field(self, key: str, parsed: tuple[float, str], values: dict[str, float], counts: dict[str, float]) -> None:
        number, unit = parsed
        if key == GLOBAL_BATCH_KEY:
            if number != self.last_gbs:
                values[GLOBAL_BATCH] = number
            self.last_gbs = number
        elif key == "grad norm":
            zero = number == 0.0
            self.norms_zero += zero
            self.norms_nonzero += not zero
            values[_ZERO_NORM if zero else GRAD_NORM] = number
        elif key in COUNTER_KEYS:
            counts[SKIPPED if "skipped" in key else NAN_ITERS] = number
        else:
            name, scale = field_name(key, unit)
            if name is not None:
                values[name] = number * scale

    def _loss_check(self, fields: list[tuple[str, str]], values: dict[str, float], counts: dict[str, float],
                    record: _Record, truncated: bool) -> None:
        if LOSS in values:
            return
        keys = {key.lower() for key, _ in fields}
        if truncated and not keys & AFTER_LOSS:
            return  # cut before where the loss would be: nothing to conclude
        values[LOSS_MISSING] = 1.0
        if counts[SKIPPED] > 0 and counts[NAN_ITERS] == 0:
            self.notes["loss_missing"] = ("records without `lm loss` that report skipped iterations: the loss "
                                          "is unknown (every iteration of the interval was skipped), not NaN")
            return
        values[LOSS] = math.nan
        self.notes["loss_nan"] = ("records without `lm loss` and without skipped iterations: Megatron drops the "
                                  "loss when its average is NaN/Inf, so train/loss = NaN there")

    def _learn(self, fields: list[tuple[str, str]], values: dict[str, float]) -> None:
        """Compile a fast-path regex for this record's exact shape, when the shape is the common one."""
        expected = tuple(name for name in values if name != GLOBAL_BATCH)
        if LOSS not in values or any(math.isnan(v) for v in values.values()):
            return
        key = shape(fields)
        if key not in self.templates:
            self.templates[key] = compile_template(fields)
        template = self.templates[key]
        # Only a shape whose fast rows are exactly what this general parse produced is worth using.
        self.template = template if template.layout.names == expected and len(expected) >= 2 else None

    def _learn_native(self, record: _Record, fields: list[tuple[str, str]], before: Template | None) -> None:
        """The line scanner's shape of the record's line, when it is the line of the template in force
        (a record that taught nothing keeps the shape there was)."""
        found = None
        if self.use_native and self.template is not None and self.raw is not None and self.raw[0] == record.line:
            text = self.raw[1].decode("utf-8", errors="replace").rstrip()
            found = learn(self.raw[1], len(text) - len(record.text), record.text, fields, self.template.layout.names)
        if found is not None or self.template is not before or self.template is None:
            self.native = found

    # -- other lines ---------------------------------------------------------------------------------
    def _eval_record(self, index: int, body: str, head: re.Match[str]) -> None:
        namespace = "test" if head.group(1).lower() == "test" or "test" in head.group(2).lower() else "eval"
        it = _EVAL_STEP.search(head.group(2))
        step = int(it.group(1)) if it else self.last_step
        values: dict[str, float] = {}
        for segment in body.split("|")[1:]:
            key, sep, text = segment.rpartition(":")
            parsed = number(text) if sep else None
            if parsed is not None:
                values[eval_name(key, namespace)] = parsed[0]
        if step is None or not values:
            self.keeper.offer(index, body, self.last_step)
            return
        self.table.add_values(index, step, None, values)

    def _timers(self, index: int, body: str) -> None:
        if self.last_step is None:
            return
        values = {}
        for segment in body.split("|")[1:]:
            key, sep, text = segment.rpartition(":")
            parsed = number(text) if sep else None
            if parsed is not None and key.strip():
                name = normalize(key.replace("(", "").replace(")", ""))
                values[DATA_WAIT if name == "batch_generator" else f"perf/{name}_s"] = parsed[0] / 1000.0
        self.table.add_values(index, self.last_step, None, values)

    def _memory(self, index: int, body: str) -> None:
        m = _MEMORY.search(body)
        step = int(m.group(1)) if m and m.group(1) else self.last_step
        if step is None:
            return
        names = {"allocated": CUDA_ALLOCATED, "max allocated": CUDA_PEAK, "reserved": CUDA_RESERVED,
                 "max reserved": "memory/cuda_max_reserved_gib"}
        values = {}
        for segment in body.split("|")[1:]:
            key, sep, text = segment.rpartition(":")
            parsed = number(text) if sep else None
            name = names.get(" ".join(key.split()).lower())
            if parsed is not None and name:
                values[name] = parsed[0] / 1024.0
        self.table.add_values(index, step, None, values)

    def _argument(self, body: str) -> bool:
        if "arguments" in body and body.lstrip().startswith("-"):
            self.in_args = "end of arguments" not in body
            return True
        m = _ARG.match(body) if self.in_args else None
        if m and len(self.args) < _MAX_ARGS:
            self.args[m.group(1)] = m.group(2).strip()
        return m is not None

    def _flush_overflow(self, line: int) -> None:
        if not self.pending_overflows or self.last_step is None:
            return
        values = {SKIPPED: float(self.pending_overflows)}
        if self.pending_scale is not None:
            values[LOSS_SCALE] = self.pending_scale
        self.table.add_values(line, self.last_step + 1, None, values)

    # -- result ----------------------------------------------------------------------------------------
    def _result(self) -> ImportedRun:
        rename: dict[str, str | None] = {_ZERO_NORM: GRAD_NORM} if self.norms_zero else {}
        if self.norms_zero and not self.norms_nonzero:
            rename[_ZERO_NORM] = None
            self.notes["grad_norm_zero"] = (f"{self.norms_zero} `grad norm: 0.000` values dropped: this log never "
                                            "shows a non-zero grad norm (old Megatron-DeepSpeed under pipeline "
                                            "parallelism printed 0), so they are not real zeros")
        columns, rejected = self._columns(rename)
        self.warnings += describe(rejected, lambda line: f"{self.path}:{line}")
        if any(key in self.fields_seen for key in ("lm_loss", "samples/sec")):
            self.meta["dialect"] = "gpt-neox"
        self.meta["fields"] = list(self.fields_seen)
        if self.args:
            self.meta["args"] = self.args
        if self.notes:
            self.meta["notes"] = self.notes
        return ImportedRun(str(self.path), NAME, None, self.meta, self.warnings, self.keeper.lines(),
                           columns=columns)

    def _columns(self, rename: dict[str, str | None]) -> tuple[Columns | CodedColumns, list[Rejected]]:
        # Blocks never hold the zero-norm placeholder (a template needs a non-zero norm): no rename there.
        # numpy: loaded when a log is read, not when the package is imported
        from stethoscope.logtext.coded import RowBlock, join
        from stethoscope.logtext.coded_parts import PartsColumns

        parts: list[Columns | CodedColumns | RowBlock] = []
        rejected: list[Rejected] = []
        for part in self.parts:
            if isinstance(part, PointTable):
                part, more = part.build_columns(rename)
                rejected += more
            parts.append(part)
        if any(isinstance(part, RowBlock) and part.size for part in parts):  # laid out as points only when read so
            return PartsColumns(parts), rejected
        return join(parts), rejected
