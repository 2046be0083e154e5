"""Dataset files, row by row: JSONL (streamed in chunks, orjson), JSON, CSV/TSV, Parquet, and a
`datasets` save_to_disk folder (Arrow IPC stream files, read with pyarrow: no `datasets` needed).

Every reader yields `(line, record, may_hold_nonfinite)`: the 1-based line for line formats (None
otherwise), the row as a dict, and whether its values can hold NaN/Inf at all (orjson refuses NaN,
so a JSONL row parsed by orjson cannot, and needs no walk).
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from stethoscope.errors import InputError

FORMATS = ("JSONL (.jsonl, .ndjson), JSON (.json), CSV (.csv, .tsv), Parquet (.parquet) "
           "or a folder written by datasets' save_to_disk")
_SUFFIX = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".tsv": "tsv",
           ".parquet": "parquet", ".pq": "parquet"}
_EVAL_SPLITS = ("validation", "valid", "eval", "test", "dev")
CHUNK = 16 << 20  # bytes per read: large enough that Python's per-chunk work vanishes
Row = tuple["int | None", dict, bool]


@dataclass(frozen=True)
class Source:
    """One dataset to read: its path, format, and the total that progress counts against."""

    path: Path
    format: str
    total: int  # bytes for text formats, rows for Parquet/Arrow
    unit: str  # "bytes" or "rows"
    files: tuple[Path, ...] = ()  # the Arrow files of a save_to_disk folder
    split: str | None = None

    @property
    def name(self) -> str:
        return f"{self.path}[{self.split}]" if self.split else str(self.path)


def open_source(path: str | Path, split: str | None = None) -> Source:
    """The source at `path`: a file by its suffix, or a save_to_disk folder (a DatasetDict's `split`,
    'train' by default)."""
    p = Path(path)
    if not p.exists():
        raise InputError(p, "no such file or folder")
    if p.is_dir():
        return _arrow_source(p, split)
    fmt = _SUFFIX.get(p.suffix.lower())
    if fmt is None:
        raise InputError(p, f"unknown dataset format {p.suffix or '(no suffix)'!r}; expected {FORMATS}")
    if fmt == "parquet":
        return Source(p, fmt, _parquet(p).metadata.num_rows, "rows")
    return Source(p, fmt, p.stat().st_size, "bytes")


def eval_split(path: str | Path) -> Source | None:
    """The validation/test split of a saved DatasetDict, when `path` is one and has such a split."""
    p = Path(path)
    if not (p / "dataset_dict.json").is_file():
        return None
    splits = _splits(p)
    for name in _EVAL_SPLITS:
        if name in splits:
            return _arrow_source(p, name)
    return None


def rows(source: Source, advance: Callable[[int], None] = lambda n: None) -> Iterator[Row]:
    """Every row of `source`; `advance(n)` is told the bytes or rows read since its last call."""
    reader = {"jsonl": _jsonl, "json": _json, "csv": _csv, "tsv": _csv, "parquet": _parquet_rows,
              "arrow": _arrow_rows}[source.format]
    return reader(source, advance)


# -- JSON lines ----------------------------------------------------------------------------------
def _jsonl(source: Source, advance: Callable[[int], None]) -> Iterator[Row]:
    line_no, rest = 0, b""
    with open(source.path, "rb") as f:
        while True:
            chunk = f.read(CHUNK)
            if not chunk:
                break
            advance(len(chunk))
            buf = rest + chunk
            cut = buf.rfind(b"\n")
            if cut < 0:
                rest = buf
                continue
            rest = buf[cut + 1:]
            for line in buf[:cut].split(b"\n"):
                line_no += 1
                yield from _jsonl_line(source.path, line, line_no)
    if rest:
        yield from _jsonl_line(source.path, rest, line_no + 1)


def _jsonl_line(path: Path, line: bytes, line_no: int) -> Iterator[Row]:
    try:
        record, walk = orjson.loads(line), False
    except orjson.JSONDecodeError as exc:
        if not line.strip():
            return
        record, walk = _python_json(path, line, line_no, exc), True
    if not isinstance(record, dict):
        raise InputError(path, f"expected a JSON object per line, got {type(record).__name__}", line_no)
    yield line_no, record, walk


def _python_json(path: Path, text: bytes, line_no: int | None, first: Exception) -> Any:
    """Python's json reads the NaN / Infinity / 1e999 that Python's own json.dump writes (orjson does not)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        where = str(first).split(":")[0]
        raise InputError(path, f"not valid JSON ({where}); expected one JSON object per line", line_no) from None


# -- JSON ----------------------------------------------------------------------------------------
def _json(source: Source, advance: Callable[[int], None]) -> Iterator[Row]:
    raw = source.path.read_bytes()
    advance(len(raw))
    try:
        data, walk = orjson.loads(raw), False
    except orjson.JSONDecodeError as exc:
        if "unexpected content after document" in str(exc):  # JSON lines in a .json file (datasets reads those too)
            yield from _jsonl(source, lambda n: None)
            return
        data, walk = _python_json_document(source.path, raw, exc), True
    for record in _records(source.path, data):
        yield None, record, walk


def _python_json_document(path: Path, raw: bytes, first: Exception) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            raise InputError(path, "not valid JSON: more than one document (JSON lines belong in a .jsonl file)",
                             exc.lineno) from None
        raise InputError(path, f"not valid JSON ({exc.msg})", exc.lineno) from None
    except (ValueError, RecursionError):
        raise InputError(path, f"not valid JSON ({first})") from None


def _records(path: Path, data: Any) -> list[dict]:
    """A list of row objects, a {"data": [...]} wrapper, or columns of equal length."""
    if isinstance(data, dict):
        lists = {k: v for k, v in data.items() if isinstance(v, list)}
        rowlists = [v for v in lists.values() if v and all(isinstance(r, dict) for r in v[:100])]
        if len(rowlists) == 1:
            data = rowlists[0]
        elif lists and len(lists) == len(data) and len({len(v) for v in lists.values()}) == 1:
            keys = list(lists)
            data = [dict(zip(keys, values)) for values in zip(*lists.values())]
    if not isinstance(data, list):
        raise InputError(path, "expected a JSON array of objects, an object holding one, or columns of equal length")
    for i, record in enumerate(data):
        if not isinstance(record, dict):
            raise InputError(path, f"row {i}: expected a JSON object, got {type(record).__name__}")
    return data


# -- CSV -----------------------------------------------------------------------------------------
def _csv(source: Source, advance: Callable[[int], None]) -> Iterator[Row]:
    delimiter = "\t" if source.format == "tsv" else ","
    before = csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # a long text field is data here, not damage
    try:
        yield from _csv_rows(source, advance, delimiter)
    finally:
        csv.field_size_limit(before)  # the csv module's limit is process-wide: the importers rely on it


def _csv_rows(source: Source, advance: Callable[[int], None], delimiter: str) -> Iterator[Row]:
    with open(source.path, newline="", encoding="utf-8", errors="replace") as f:
        reader = csv.DictReader(f, delimiter=delimiter)
        seen = 0
        try:
            for record in reader:
                if None in record:  # more cells than the header names
                    raise InputError(source.path, f"{len(record) - 1 + len(record[None])} cells, the header names "
                                     f"{len(reader.fieldnames or [])}", reader.line_num)
                yield reader.line_num, record, True
                if reader.line_num % 4096 == 0:
                    pos = f.buffer.tell()
                    advance(pos - seen)
                    seen = pos
        except csv.Error as exc:
            raise InputError(source.path, f"not valid CSV ({exc})", reader.line_num) from None
        advance(source.total - seen)


# -- Parquet and Arrow ---------------------------------------------------------------------------
def _pyarrow(path: Path) -> Any:
    try:
        import pyarrow
    except ImportError:
        raise InputError(path, "reading Parquet and Arrow needs pyarrow: pip install 'stethoscope[data]'") from None
    return pyarrow


def _parquet(path: Path) -> Any:
    _pyarrow(path)
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a damaged file
        raise InputError(path, f"not a readable Parquet file ({exc})") from None


def _parquet_rows(source: Source, advance: Callable[[int], None]) -> Iterator[Row]:
    batches = _parquet(source.path).iter_batches(batch_size=4096)
    yield from _batches(source.path, batches, advance)


def _batches(path: Path, batches: Iterator[Any], advance: Callable[[int], None]) -> Iterator[Row]:
    """Rows of Arrow record batches; a batch pyarrow cannot decode is an InputError naming the file."""
    pa = _pyarrow(path)
    while True:
        try:
            batch = next(batches, None)
            if batch is None:
                return
            records = batch.to_pylist()
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise InputError(path, f"damaged data ({exc})") from None
        advance(batch.num_rows)
        for record in records:
            yield None, record, True


def _splits(folder: Path) -> list[str]:
    try:
        return list(json.loads((folder / "dataset_dict.json").read_text())["splits"])
    except (OSError, ValueError, KeyError, TypeError):
        raise InputError(folder / "dataset_dict.json", "expected {\"splits\": [...]} as datasets writes it") from None


def _arrow_source(folder: Path, split: str | None) -> Source:
    if (folder / "dataset_dict.json").is_file():
        splits = _splits(folder)
        name = split or ("train" if "train" in splits else splits[0] if splits else None)
        if name not in splits:
            raise InputError(folder, f"no split {name!r}; the splits are {', '.join(splits) or 'none'}")
        inner = _arrow_source(folder / name, None)
        return Source(folder, "arrow", inner.total, "rows", inner.files, name)
    state = folder / "state.json"
    if not state.is_file():
        raise InputError(folder, f"a folder that is not a datasets save_to_disk folder (no state.json); expected {FORMATS}")
    try:
        files = tuple(folder / f["filename"] for f in json.loads(state.read_text())["_data_files"])
    except (OSError, ValueError, KeyError, TypeError):
        raise InputError(state, "expected {\"_data_files\": [{\"filename\": ...}]} as datasets writes it") from None
    pa = _pyarrow(folder)
    try:
        total = sum(_arrow_reader(f).read_all().num_rows for f in files)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(folder, f"damaged Arrow data ({exc})") from None
    return Source(folder, "arrow", total, "rows", files)


def _arrow_reader(path: Path) -> Any:
    pa = _pyarrow(path)
    if not path.is_file():
        raise InputError(path, "listed in state.json but missing")
    try:
        return pa.ipc.open_stream(pa.memory_map(str(path)))
    except (pa.ArrowException, OSError):
        try:
            return pa.ipc.open_file(pa.memory_map(str(path)))
        except (pa.ArrowException, OSError) as exc:
            raise InputError(path, f"not an Arrow IPC file ({exc})") from None


def _arrow_rows(source: Source, advance: Callable[[int], None]) -> Iterator[Row]:
    for path in source.files:
        reader = _arrow_reader(path)
        batches = iter(reader) if not hasattr(reader, "num_record_batches") \
            else (reader.get_batch(i) for i in range(reader.num_record_batches))
        yield from _batches(path, batches, advance)
