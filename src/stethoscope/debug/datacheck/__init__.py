"""Checks of a training dataset before a run spends GPU hours on it: empty and over-long examples,
duplicates, fully masked labels, NaN/Inf, chat-template consistency and train/eval overlap.

Reads JSONL, JSON, CSV/TSV, Parquet and `datasets` save_to_disk folders; Parquet/Arrow need pyarrow
and token counts need `tokenizers` (both in the `data` extra), imported only when used.
"""

from __future__ import annotations

from stethoscope.debug.datacheck.read import Source, eval_split, open_source
from stethoscope.debug.datacheck.report import CHECKS, check, load_tokenizer

__all__ = ["CHECKS", "Source", "check", "eval_split", "load_tokenizer", "open_source"]
