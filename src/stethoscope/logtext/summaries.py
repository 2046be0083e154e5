"""Lines that sum a stretch of training up rather than record a step: the general reader keeps them as text.

- The HF Trainer's end-of-run dict (`{'train_runtime': 812.3, …, 'train_loss': 2.41}`).
- fairseq's end-of-epoch line (`| INFO | train | epoch 002 | loss 4.025 | … | num_updates 1200 | …`, after
  `end of epoch 2 (average epoch stats below)`): its loss is the epoch's mean, printed at the epoch's last update,
  so it is not that update's train loss. Its `train_inner` lines (`epoch 002:  450 / 1891 loss=…`) are the records.
  A log of fairseq's alone is read by the fairseq importer, which knows both.
- A stats line that types itself an epoch's (pycls' `json_stats: {"_type": "train_epoch", "epoch": "2/100", "loss":
  ..}`): the epoch's means; its `"_type": "train_iter"` lines are the records.
"""

from __future__ import annotations

import re

SUMMARY = "train_runtime"  # the HF Trainer's end-of-run summary dict: not a step
_FAIRSEQ_EPOCH = re.compile(r"\btrain \| epoch \d+ \| ")
_TYPED_EPOCH = re.compile(r"[\"']_?type[\"']\s*:\s*[\"']train_epoch[\"']")


def summary(body: str) -> bool:
    """True when a line's body is a summary (of the run or of an epoch), not a step's record."""
    return SUMMARY in body or (" | epoch " in body and _FAIRSEQ_EPOCH.search(body) is not None) or (
        "train_epoch" in body and _TYPED_EPOCH.search(body) is not None)
