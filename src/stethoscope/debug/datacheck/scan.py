"""One pass over one dataset file: per-row facts kept compactly (hashes and lengths in arrays, flagged
rows in lists), so a 1 GB file costs a few tens of MB.

Duplicates: exact (the example's whole text) and near, by normalized-text hashing: ASCII letters
lowercased, ASCII punctuation and all whitespace removed (one bytes.translate, so it costs little
on a 1 GB file). Near thus means "the same text up to case, punctuation and spacing" (copies
re-exported with other formatting); paraphrases and edits of words are not caught.
"""

from __future__ import annotations

import string
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from stethoscope.debug.datacheck import fields
from stethoscope.debug.datacheck.minhash import Signatures
from stethoscope.debug.datacheck.read import Source, rows

_IGNORED = (string.punctuation + string.whitespace).encode()  # dropped before the near-duplicate hash
TOKENIZE_BATCH = 2048


@dataclass
class Scan:
    """What one pass found in one file."""

    source: Source
    role: str
    unit: str = "characters"
    rows: int = 0
    lines: array = field(default_factory=lambda: array("q"))  # 1-based line per row (0: not a line format)
    exact: array = field(default_factory=lambda: array("q"))  # hash of the text, 0 for an empty row
    near: array = field(default_factory=lambda: array("q"))  # hash of the normalized text
    lengths: array = field(default_factory=lambda: array("q"))
    flagged: dict[str, list[int]] = field(default_factory=dict)  # check → rows
    nonfinite_fields: dict[int, str] = field(default_factory=dict)
    templates: dict[str, int] = field(default_factory=dict)
    template_rows: dict[str, list[int]] = field(default_factory=dict)
    has_labels: int = 0
    has_response: int = 0
    minhash: Signatures | None = None

    def flag(self, check: str, row: int) -> None:
        self.flagged.setdefault(check, []).append(row)

    def line(self, row: int) -> int | None:
        return self.lines[row] or None if row < len(self.lines) else None


def scan(source: Source, role: str, tokenizer: Any = None, max_len: int | None = None,
         advance: Callable[[int], None] = lambda n: None, minhash: bool = False) -> Scan:
    """Read every row of `source` once, recording what the checks need. With `max_len`, a row whose
    prompt alone reaches it is flagged: truncation cuts its whole response, and every label is masked."""
    s = Scan(source, role, unit="tokens" if tokenizer is not None else "characters",
             minhash=Signatures() if minhash else None)
    add_signature = s.minhash.add if s.minhash is not None else None
    pending: list[tuple[int, str, str | None]] = []  # rows waiting for the tokenizer
    csv_cells = source.format in ("csv", "tsv")
    ids_rows = 0
    # Local names for what runs once per row: a 1 GB file is a million rows.
    add_line, add_exact, add_near, add_length = s.lines.append, s.exact.append, s.near.append, s.lengths.append
    example, template, templates, flag = fields.example, fields.template, s.templates, s.flag
    row = -1
    for row, (line, record, walk) in enumerate(rows(source, advance)):
        add_line(line or 0)
        text, prompt, response, ids, labels, is_chat = example(record)
        if walk:
            bad = fields.nonfinite_field(record, strings_too=csv_cells)
            if bad is not None:
                flag("nonfinite", row)
                s.nonfinite_fields[row] = bad
        if labels is not None:
            s.has_labels += 1
            if labels.count(-100) == len(labels):
                flag("labels_all_masked", row)
        if text and not text.isspace():
            add_exact(hash(text))
            add_near(hash(text.encode().lower().translate(None, _IGNORED)))
            if add_signature is not None:
                add_signature(row, text)
        elif ids:
            h = _ids_hash(ids)
            add_exact(h)
            add_near(h)
        else:
            flag("empty", row)
            add_exact(0)
            add_near(0)
        if response is not None:
            s.has_response += 1
            if not response or response.isspace():
                flag("empty_response", row)
        family = template(text, is_chat)
        seen = templates.get(family, 0)
        templates[family] = seen + 1
        if seen < 10:
            s.template_rows.setdefault(family, []).append(row)
        if ids is not None:
            ids_rows += 1
            add_length(len(ids))
        elif tokenizer is not None:
            add_length(0)
            pending.append((row, text, prompt if response is not None else None))
            if len(pending) >= TOKENIZE_BATCH:
                _tokenize(s, tokenizer, pending, max_len)
        else:
            add_length(len(text))
            if max_len is not None and response is not None and prompt is not None and len(prompt) >= max_len:
                flag("response_truncated", row)
    s.rows = row + 1
    if pending:
        _tokenize(s, tokenizer, pending, max_len)
    if ids_rows and tokenizer is None:
        s.unit = "tokens" if ids_rows == s.rows else "characters (tokens in rows with input_ids)"
    return s


def _ids_hash(ids: list) -> int:
    try:
        return hash(tuple(ids))
    except TypeError:  # nested lists (a batch stored in one row)
        return hash(repr(ids))


def _tokenize(s: Scan, tokenizer: Any, pending: list[tuple[int, str, str | None]], max_len: int | None) -> None:
    """Token counts of a batch of rows (the tokenizers library encodes a batch on all cores)."""
    encodings = tokenizer.encode_batch([text for _, text, _ in pending])
    for (row, _, _), enc in zip(pending, encodings):
        s.lengths[row] = len(enc.ids)
    prompts = [(row, prompt) for row, _, prompt in pending if prompt is not None]
    if prompts and max_len is not None:
        for (row, _), enc in zip(prompts, tokenizer.encode_batch([p for _, p in prompts])):
            if len(enc.ids) >= max_len:
                s.flag("response_truncated", row)
        s.flagged.get("response_truncated", []).sort()
    pending.clear()
