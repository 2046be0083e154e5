"""Opening a foreign log file: the existence checks and reads every importer shares."""

from __future__ import annotations

import gzip
import io
import json
import re
import zlib
from pathlib import Path
from typing import BinaryIO, Protocol

from stethoscope.errors import InputError
from stethoscope.importers.base import ImportedRun
from stethoscope.importers.dressed import dressed, undressed

# Enough to get past a Megatron argument dump or an nvidia-smi table before the first metric line.
HEAD_BYTES = 256 * 1024
_GZIP_MAGIC = b"\x1f\x8b"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")  # Windows PowerShell's `>` writes UTF-16 with one of these
UTF8_BOM = b"\xef\xbb\xbf"  # ...and its `Out-File -Encoding utf8` UTF-8 behind this mark: no part of the first line
# What a damaged gzip stream raises while it is read.
GZIP_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error)


def check_file(path: Path) -> Path:
    """`path` if it is a readable regular file; otherwise an InputError that names it."""
    if not path.exists():
        raise InputError(path, "no such file or directory")
    if path.is_dir():
        raise InputError(path, "is a directory, expected a log file")
    if not path.is_file():
        raise InputError(path, "not a regular file")
    return path


def log_name(path: Path) -> str:
    """The file's name as the log it holds: `train.log.gz` → `train.log`."""
    return path.name[:-3] if path.name.lower().endswith(".gz") else path.name


def open_log(path: Path) -> BinaryIO:
    """The file opened for binary reading; a gzip file (by its magic bytes) is decompressed on the fly, a UTF-8
    byte-order mark skipped, a wrapped log (UTF-16, a captured stream, a CSV export: `utf8`) unwrapped."""
    raw = path.open("rb")
    magic = raw.read(_STREAM_HEAD)
    raw.seek(0)
    bom = len(UTF8_BOM) if magic.startswith(UTF8_BOM) else 0
    if magic[:2] in _UTF16_BOMS or stream_field(magic[bom:]) or _CSV_EXPORT.match(magic, bom, 256) or _document(
            magic[bom:]) or dressed(magic[bom:]):
        with raw:
            return io.BytesIO(utf8(raw.read()))
    if bom:
        raw.seek(bom)
        return raw
    if magic[:1] == b"\x00":  # a file truncated under its writer: a hole of NULs, then the text (`unpadded`)
        return _past_hole(raw)
    if magic[:2] != _GZIP_MAGIC:
        return raw
    return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]


def utf8(data: bytes) -> bytes:
    """`data` as the UTF-8 text a reader reads: a text with a UTF-16 byte-order mark (a log redirected by
    Windows PowerShell) is transcoded; Docker's json-file log (`{"log":"step 10 loss 2.3\\n","stream":"stdout",
    "time":..}` a line: `/var/lib/docker/containers/*/*-json.log`) is unwrapped to the lines the container
    printed; a UTF-8 byte-order mark is dropped; anything else is returned as it is (the readers decode UTF-8
    leniently)."""
    if data[:2] in _UTF16_BOMS:
        data = data.decode("utf-16", errors="replace").encode("utf-8")
    if data[:3] == UTF8_BOM:
        data = data[3:]
    data = unpadded(data)
    if (text := undressed(data)) is not None:  # an asciinema cast, slog's logfmt, fluent-bit's records
        return text
    field = stream_field(data[:_STREAM_HEAD])
    if field is None and _CSV_EXPORT.match(data, 0, 256):
        data = _exported_lines(data)
    elif field is None and _document(data[:_STREAM_HEAD]):
        data = _document_lines(data)
    return _stream_lines(data, field) if field else data


# A run of NUL bytes a text log can hold: the hole a file truncated while its writer held it open starts with
# (`> train.log`, logrotate's copytruncate: the next write lands at the old offset), or the zeroed blocks a
# crash leaves at its end. A binary file's NULs are mostly short (lengths, padding) among other control bytes.
_HOLE = re.compile(rb"\A\x00+|\x00{16,}")


def unpadded(data: bytes) -> bytes:
    """`data` without its runs of NUL bytes when what is left is text (no NUL, few other control bytes); a
    binary file is returned as it is, for the readers to refuse."""
    if data.find(b"\x00") < 0:
        return data
    text = _HOLE.sub(b"", data)
    head = text[:_STREAM_HEAD]
    odd = sum(head.count(bytes([b])) for b in range(32) if b not in (9, 10, 12, 13, 27))
    return text if text.find(b"\x00") < 0 and odd <= len(head) // 20 else data


def _past_hole(raw: BinaryIO) -> BinaryIO:
    """`raw` positioned at its first byte that is not NUL (at its end when it is all NULs)."""
    start = 0
    while chunk := raw.read(64 * 1024):
        text = chunk.lstrip(b"\x00")
        if text:
            raw.seek(start + len(chunk) - len(text))
            return raw
        start += len(chunk)
    return raw


_DOCKER = b'{"log":'
_STREAM_HEAD = 4096  # the bytes that show a captured stream's first records


def stream_field(head: bytes) -> str | None:
    """The field that holds the printed text when `head` starts a captured output stream, else None: one JSON
    object a line whose one string that ends a line is what the program printed, alone (Docker's json-file,
    `{"log":"step 10 loss 2.3\\n","stream":"stdout","time":..}`) or as the items of one JSON list (a Kaggle
    notebook's log, `[{"stream_name":"stdout","time":5.87,"data":"step 10 ..\\n"}`, then `,{..}` a line)."""
    head = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(_DOCKER):
        return "log"
    if not head.startswith((b'[{"', b'{"')):
        return None
    for line in head.split(b"\n")[:4]:
        try:
            record = json.loads(line.strip().lstrip(b"[,").rstrip(b",]"))
        except ValueError:
            continue
        printed = [k for k, v in record.items() if isinstance(v, str) and v.endswith("\n")] if isinstance(
            record, dict) else []
        if len(printed) == 1:
            return printed[0]
        said = [k for k in _MESSAGE_KEYS if isinstance(record, dict) and isinstance(record.get(k), (str, list))]
        if said and not any(isinstance(v, (int, float)) for v in record.values()):  # (a number: a metrics record)
            return said[0]  # journald's `journalctl -o json`: `{"__CURSOR":..,"MESSAGE":"step 10 loss 2.3"}`
    return None


# The fields a logging system's JSON record holds its message in, a line without its newline (journald's
# `MESSAGE`, a structured logger's `message`/`msg`, Cloud Logging's `textPayload`).
_MESSAGE_KEYS = ("MESSAGE", "message", "msg", "textPayload")


# A log exported as a table of its lines (CloudWatch Logs Insights' `@timestamp,@message`): a header of a few
# columns, the last the message; each row's message is a line the program printed (CSV-quoted: `""` for `"`).
_CSV_EXPORT = re.compile(rb'(?:"?@?[A-Za-z_]+"?,){1,3}"?@?(?i:message|log|line)"?\r?\n')


def _exported_lines(data: bytes) -> bytes:
    """The message column of a log exported as CSV, one printed line a row (a row of another width is kept)."""
    import csv

    text = data.decode("utf-8", "replace")
    rows = csv.reader(io.StringIO(text, newline=""))
    width = len(next(rows, []))
    return "".join(f"{row[-1]}\n" if len(row) == width else ",".join(row) + "\n" for row in rows).encode("utf-8")


def _stream_lines(data: bytes, field: str) -> bytes:
    """The text a captured stream wraps: each line's `field` in order (a line that is no such object, the list's
    brackets, is kept as it is)."""
    out = []
    for line in data.splitlines():
        item = line.strip().lstrip(b"[,").rstrip(b",]")
        try:
            record = json.loads(item) if item.startswith(b"{") else None
        except ValueError:
            record = None
        text = record.get(field) if isinstance(record, dict) else None
        if isinstance(text, list) and all(isinstance(b, int) and 0 <= b < 256 for b in text):
            text = bytes(text).decode("utf-8", "replace")  # journald's message with control characters: its bytes
        ended = field in _MESSAGE_KEYS and isinstance(text, str) and not text.endswith("\n")  # (journald's)
        out.append((text + "\n" * ended).encode("utf-8") if isinstance(text, str) else line + b"\n")
    return b"".join(out)


def read_error(path: Path, exc: BaseException) -> InputError:
    """The InputError for an OSError or a damaged gzip stream met while reading `path`."""
    if isinstance(exc, GZIP_ERRORS):
        return InputError(path, f"a damaged or truncated gzip file ({exc}); decompress what is left with "
                                "`zcat FILE > out.log` and read that")
    return InputError(path, f"cannot read: {getattr(exc, 'strerror', None) or exc}")


def read_bytes(path: Path) -> bytes:
    """The whole file as bytes (decompressed when gzipped); InputError when missing or unreadable."""
    check_file(path)
    try:
        with path.open("rb", buffering=0) as raw:  # unbuffered: one read the size of the file (fstat)
            if raw.read(2) != _GZIP_MAGIC:
                raw.seek(0)
                return utf8(raw.readall())
            raw.seek(0)
            with gzip.GzipFile(fileobj=raw, mode="rb") as f:
                return f.read()
    except (OSError, *GZIP_ERRORS) as exc:
        raise read_error(path, exc) from None


def read_text(path: Path) -> str:
    """The whole file decoded as UTF-8 (undecodable bytes replaced, never an error)."""
    return read_bytes(path).decode("utf-8", errors="replace")


def read_head(path: Path, size: int = HEAD_BYTES) -> str:
    """The first `size` bytes decoded leniently; what `Importer.sniff` looks at."""
    check_file(path)
    chunks: list[bytes] = []
    try:
        with open_log(path) as f:
            while size > 0 and (chunk := f.read(min(size, 64 * 1024))):  # chunks: a truncated gzip keeps its start
                chunks.append(chunk)
                size -= len(chunk)
    except GZIP_ERRORS:
        pass  # the start is enough to tell the format; the full read reports the damage
    except OSError as exc:
        raise read_error(path, exc) from None
    return unpadded(b"".join(chunks)).decode("utf-8", errors="replace")


def is_text(head: str) -> bool:
    """False for binary content (NUL bytes), which no text importer should claim."""
    return "\x00" not in head


class LineReader(Protocol):
    """Reads a text log line by line: `line()` says whether the line carried metrics."""

    warnings: list[str]

    def line(self, number: int, text: str) -> bool: ...

    def result(self) -> ImportedRun: ...


def read_lines(path: Path, reader: LineReader, cut: re.Pattern[str]) -> ImportedRun:
    """Feed every line of a text log to `reader`; warn when the last line looks cut short (`cut`
    matches it but nothing was read from it)."""
    from stethoscope.logtext.table import gc_paused

    lines = read_text(path).split("\n")
    parsed = False
    with gc_paused():
        for number, text in enumerate(lines, 1):
            parsed = reader.line(number, text.rstrip())
        if not parsed and cut.search(lines[-1]):
            reader.warnings.append(f"{path}:{len(lines)}: the last line looks cut short (no newline, no "
                                   "metrics read from it)")
        return reader.result()


# A JSON document of a log's lines: its records each hold one printed text (Cloud Logging's `gcloud logging read
# --format=json`: a list of entries with `textPayload` or `jsonPayload.message`; a Jupyter notebook: its cells'
# stream outputs, `{"output_type": "stream", "text": ["step 10 ..\\n", ..]}`).
_DOCUMENT = re.compile(rb'\A\s*[\[{]\s*\n[\s\S]*?"(?:textPayload|jsonPayload|output_type|cells)"\s*:')


def _document(head: bytes) -> bool:
    return _DOCUMENT.match(head) is not None


def _document_lines(data: bytes) -> bytes:
    """The printed lines a JSON document of a log holds, in its order (the data as it is when it holds none)."""
    try:
        doc = json.loads(data)
    except ValueError:
        return data
    out: list[str] = []
    _printed(doc, out)
    return "".join(t if t.endswith("\n") else t + "\n" for t in out).encode("utf-8") if out else data


def _printed(node: object, out: list[str]) -> None:
    if isinstance(node, list):
        for item in node:
            _printed(item, out)
    elif isinstance(node, dict):
        payload = node.get("jsonPayload")
        text = node.get("textPayload", payload.get("message") if isinstance(payload, dict) else None)
        if node.get("output_type") == "stream":
            text = "".join(node["text"]) if isinstance(node.get("text"), list) else node.get("text")
            out.extend(text.splitlines(keepends=True) if isinstance(text, str) else ())
        elif isinstance(text, str):
            out.append(text)
        else:
            for value in node.values():
                _printed(value, out)
