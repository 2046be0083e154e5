"""The checks, from one pass over the training file (and the eval file): counts, percentages and the
rows where each problem sits, as one JSON-ready dict."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stethoscope.debug.datacheck import fields, minhash
from stethoscope.debug.datacheck.read import Source
from stethoscope.debug.datacheck.scan import Scan, scan
from stethoscope.errors import InputError, UsageError

EXAMPLES = 10  # rows listed per check


@dataclass(frozen=True)
class CheckKind:
    severity: str
    title: str
    why: str


CHECKS: dict[str, CheckKind] = {
    "nonfinite": CheckKind("error", "NaN or Inf in a numeric field",
                           "one NaN in a loss weight, reward or score turns the loss NaN"),
    "labels_all_masked": CheckKind("error", "every label masked (-100)",
                                   "these rows give no loss: when most rows are like this the loss plateaus and "
                                   "the model learns nothing (check the response template / collator)"),
    "response_truncated": CheckKind("error", "prompt alone reaches --max-len",
                                    "truncation cuts the whole response, so every label of the row is masked"),
    "eval_overlap": CheckKind("error", "eval rows also in the training file",
                              "the eval loss measures memorisation, not generalisation"),
    "template_mismatch": CheckKind("error", "chat template differs between train and eval",
                                   "eval loss is measured on a format the model was not trained on"),
    "empty": CheckKind("warning", "empty examples", "they waste steps; with padding-only labels the loss can be NaN"),
    "empty_response": CheckKind("warning", "empty responses", "the model is trained to answer nothing"),
    "too_long": CheckKind("warning", "longer than --max-len", "the trainer truncates (or drops) them"),
    "duplicate": CheckKind("warning", "exact duplicates of an earlier row", "repeated rows are over-weighted"),
    "near_duplicate": CheckKind("warning", "near duplicates of an earlier row",
                                "repeated rows are over-weighted"),
    "eval_near_overlap": CheckKind("warning", "eval rows nearly the same as training rows",
                                   "the eval loss is optimistic"),
    "template_mixed": CheckKind("warning", "more than one chat template in the file",
                                "the model learns two formats; generation may use either"),
}


def load_tokenizer(path: str | Path) -> tuple[Any, int | None]:
    """A local tokenizer.json (or a folder holding one), and the model_max_length its
    tokenizer_config.json states, if any. Never downloads."""
    p = Path(path)
    file = p / "tokenizer.json" if p.is_dir() else p
    if not file.is_file():
        raise InputError(file, "no such tokenizer file (expected a tokenizer.json or a folder holding one)")
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise UsageError("counting tokens needs the tokenizers library: pip install 'stethoscope[data]'") from None
    try:
        tokenizer = Tokenizer.from_file(str(file))
    except Exception as exc:  # noqa: BLE001 - the Rust side raises a bare Exception
        raise InputError(file, f"not a tokenizers tokenizer.json ({exc})") from None
    return tokenizer, _model_max_length(file.parent / "tokenizer_config.json")


def _model_max_length(path: Path) -> int | None:
    import json

    try:
        value = json.loads(path.read_text()).get("model_max_length")
    except (OSError, ValueError, AttributeError):
        return None
    return int(value) if isinstance(value, (int, float)) and 0 < value < 1e8 else None


NEAR = {"normalized": "normalized-text hashing (ASCII lowercased, ASCII punctuation and whitespace removed)",
        "minhash": f"MinHash over word {minhash.SHINGLE}-grams, {minhash.PERMUTATIONS} hashes, {minhash.BANDS} LSH "
                   f"bands, estimated Jaccard >= {minhash.THRESHOLD}"}


def check(train: Source, eval: Source | None = None, tokenizer: Any = None, max_len: int | None = None,
          progress: Callable[[Source], Callable[[int], None]] = lambda s: (lambda n: None),
          near: str = "normalized") -> dict[str, Any]:
    """Every check on `train` (and `eval`, and between them). `progress(source)` gives the callable
    each reader tells the bytes or rows it read; `near` is "normalized" or "minhash"."""
    if max_len is not None and max_len < 1:
        raise UsageError(f"--max-len must be a positive number of tokens or characters, got {max_len}")
    if near not in NEAR:
        raise UsageError(f"--near must be one of {', '.join(NEAR)}, got {near!r}")
    use_minhash = near == "minhash"
    scans = [scan(train, "train", tokenizer, max_len, progress(train), use_minhash)]
    if eval is not None:
        scans.append(scan(eval, "eval", tokenizer, max_len, progress(eval), use_minhash))
    checks = [c for s in scans for c in _file_checks(s, max_len)]
    if eval is not None:
        checks += _overlap(scans[0], scans[1]) + _template_mismatch(scans[0], scans[1])
    checks.sort(key=lambda c: (c["count"] == 0, c["severity"] != "error", c["file"]))
    return {"files": [_summary(s, max_len) for s in scans], "checks": checks,
            "problems": sum(1 for c in checks if c["count"]), "near_duplicates": NEAR[near]}


def _summary(s: Scan, max_len: int | None) -> dict[str, Any]:
    lengths = np.frombuffer(s.lengths, dtype=np.int64) if s.rows else np.zeros(1, dtype=np.int64)
    return {"file": s.role, "path": s.source.name, "format": s.source.format, "rows": s.rows,
            "length": {"unit": s.unit, "p50": int(np.percentile(lengths, 50)), "p95": int(np.percentile(lengths, 95)),
                       "max": int(lengths.max()), "max_len": max_len},
            "templates": dict(sorted(s.templates.items(), key=lambda kv: -kv[1])),
            "rows_with_labels": s.has_labels, "rows_with_response": s.has_response}


def _result(check: str, s: Scan, rows: list[int] | np.ndarray, **extra: Any) -> dict[str, Any]:
    kind = CHECKS[check]
    rows = [int(r) for r in rows]
    total = s.rows
    first = rows[:EXAMPLES]
    out = {"check": check, "file": s.role, "severity": kind.severity, "title": kind.title, "why": kind.why,
           "count": len(rows), "percent": round(100.0 * len(rows) / total, 3) if total else 0.0, "rows": first}
    lines = [s.line(r) for r in first]
    if any(lines):
        out["lines"] = lines
    out.update(extra)
    return out


def _file_checks(s: Scan, max_len: int | None) -> list[dict[str, Any]]:
    out = [_result(name, s, s.flagged.get(name, [])) for name in ("empty", "labels_all_masked", "empty_response")]
    out.append(_result("nonfinite", s, s.flagged.get("nonfinite", []),
                       fields={str(r): s.nonfinite_fields[r] for r in s.flagged.get("nonfinite", [])[:EXAMPLES]}))
    if max_len is not None:
        lengths = np.frombuffer(s.lengths, dtype=np.int64)
        out.append(_result("too_long", s, np.nonzero(lengths > max_len)[0], unit=s.unit, max_len=max_len))
        out.append(_result("response_truncated", s, sorted(s.flagged.get("response_truncated", [])), unit=s.unit))
    exact_rows, exact_first = _duplicates(s.exact)
    near_rows, near_first = _duplicates(s.near) if s.minhash is None else _minhash_duplicates(s)
    only_near = ~np.isin(near_rows, exact_rows)
    out.append(_result("duplicate", s, exact_rows, of_rows=[int(r) for r in exact_first[:EXAMPLES]]))
    out.append(_result("near_duplicate", s, near_rows[only_near],
                       of_rows=[int(r) for r in near_first[only_near][:EXAMPLES]]))
    out.append(_template_mixed(s))
    return out


def _minhash_duplicates(s: Scan) -> tuple[np.ndarray, np.ndarray]:
    """Rows nearly repeating an earlier row by MinHash, merged with the normalized-hash matches (a
    copy up to case and punctuation is near by any measure), earliest match first."""
    rows, first = minhash.near_duplicates(*s.minhash.arrays())
    norm_rows, norm_first = _duplicates(s.near)
    return _merge(rows, first, norm_rows, norm_first)


def _merge(rows: np.ndarray, first: np.ndarray, more_rows: np.ndarray, more_first: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray]:
    """Union of two (row, matched row) lists; for a row in both, the earlier match."""
    r = np.concatenate([rows, more_rows])
    f = np.concatenate([first, more_first])
    order = np.lexsort((f, r))
    r, f = r[order], f[order]
    keep = np.ones(len(r), dtype=bool)
    keep[1:] = r[1:] != r[:-1]
    return r[keep], f[keep]


def _hashes(values: Any) -> tuple[np.ndarray, np.ndarray]:
    """(rows with text, their hashes): empty rows (hash 0) take no part in duplicate checks."""
    h = np.frombuffer(values, dtype=np.int64) if len(values) else np.zeros(0, dtype=np.int64)
    rows = np.nonzero(h != 0)[0]
    return rows, h[rows]


def _duplicates(values: Any) -> tuple[np.ndarray, np.ndarray]:
    """(rows that repeat an earlier row, the earlier row each repeats)."""
    rows, h = _hashes(values)
    if not len(rows):
        return rows, rows
    _, first, inverse = np.unique(h, return_index=True, return_inverse=True)
    firsts = rows[first[inverse]]
    dup = firsts != rows
    return rows[dup], firsts[dup]


def _in_train(train_values: Any, eval_values: Any) -> tuple[np.ndarray, np.ndarray]:
    """(eval rows whose hash is a training row's, that training row)."""
    train_rows, train_h = _hashes(train_values)
    eval_rows, eval_h = _hashes(eval_values)
    if not len(train_rows) or not len(eval_rows):
        return eval_rows[:0], eval_rows[:0]
    uniq, first = np.unique(train_h, return_index=True)
    pos = np.minimum(np.searchsorted(uniq, eval_h), len(uniq) - 1)
    hit = uniq[pos] == eval_h
    return eval_rows[hit], train_rows[first[pos[hit]]]


def _overlap(train: Scan, eval: Scan) -> list[dict[str, Any]]:
    rows, train_rows = _in_train(train.exact, eval.exact)
    near, near_train = _in_train(train.near, eval.near)
    if train.minhash is not None and eval.minhash is not None:
        near, near_train = _merge(*minhash.near_matches(train.minhash.arrays(), eval.minhash.arrays()), near, near_train)
    only = ~np.isin(near, rows)
    return [_result("eval_overlap", eval, rows, train_rows=[int(r) for r in train_rows[:EXAMPLES]]),
            _result("eval_near_overlap", eval, near[only], train_rows=[int(r) for r in near_train[only][:EXAMPLES]])]


def _dominant(s: Scan) -> str:
    return max(s.templates.items(), key=lambda kv: kv[1])[0] if s.templates else fields.PLAIN


def _template_mixed(s: Scan) -> dict[str, Any]:
    marked = [f for f in s.templates if f not in (fields.PLAIN, fields.MESSAGES)]
    if len(s.templates) < 2 or not marked:
        return _result("template_mixed", s, [], templates=s.templates)
    main = _dominant(s)
    rows = sorted(r for f, rs in s.template_rows.items() if f != main for r in rs)
    result = _result("template_mixed", s, rows, templates=s.templates)
    result["count"] = s.rows - s.templates[main]
    result["percent"] = round(100.0 * result["count"] / s.rows, 3)
    return result


def _template_mismatch(train: Scan, eval: Scan) -> list[dict[str, Any]]:
    want, got = _dominant(train), _dominant(eval)
    if want == got or not eval.rows or not train.rows:
        return [_result("template_mismatch", eval, [], train_template=want, eval_template=got)]
    rows = sorted(r for f, rs in eval.template_rows.items() if f != want for r in rs)
    result = _result("template_mismatch", eval, rows, train_template=want, eval_template=got)
    result["count"] = eval.rows - eval.templates.get(want, 0)
    result["percent"] = round(100.0 * result["count"] / eval.rows, 3)
    return [result]
