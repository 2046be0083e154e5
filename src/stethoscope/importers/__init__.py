"""Foreign training logs (HF Trainer, TensorBoard, Lightning, W&B/CSV, JSONL, Megatron, fairseq, text
logs of nanoGPT-style trainers) read into `ImportedRun`s in the stethoscope vocabulary.

    from stethoscope.importers import read_any
    runs = read_any(Path("logs/"))        # a file or a folder
"""

from __future__ import annotations

from stethoscope.importers.base import ImportedRun, Importer, LogLine
from stethoscope.importers.registry import default_importers, read_any, sniff_format

__all__ = ["ImportedRun", "Importer", "LogLine", "default_importers", "read_any", "sniff_format"]
