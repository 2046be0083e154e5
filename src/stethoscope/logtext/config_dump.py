"""A configuration printed as a Python dict on one line, as st-gcn prints its `Parameters:` (`{'work_dir':
'./out', 'phase': 'train', 'device': [0, 1], 'step': [20, 30, 40], ...}`): never a metrics record, even where a key
looks like a step counter (`'step': [20, 30, 40]` are an LR schedule's milestones). A metrics dict holds numbers
(the HF Trainer's `{'loss': 2.3, 'learning_rate': 1e-05, 'epoch': 0.1}`, TRL's quoted `{'loss': '2.897'}`)."""

from __future__ import annotations

import re

_DICT = re.compile(r"(?:^|\s)\{\s*'[^']+'\s*:")
# a value that is no number: a list, a tuple, a boolean, None, a quoted word or path
_SETTING = re.compile(r"""'[^']*'\s*:\s*(?:\[|\(|True\b|False\b|None\b|'(?![-+]?(?:\d|\.\d|nan'|inf)))""")
_LOSS = re.compile(r"""'[^']*loss[^']*'\s*:\s*'?[-+]?(?:\d|\.\d|nan|inf)""", re.IGNORECASE)


def config_dump(body: str) -> bool:
    """Is `body` a Python dict of settings (a value that is no number, and no loss)?"""
    return _DICT.search(body) is not None and _SETTING.search(body) is not None and _LOSS.search(body) is None
