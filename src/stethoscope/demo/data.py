"""Character-level text that ships with every Python install: the standard library's own source."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import torch

# Modules present in every CPython install; prose-heavy (docstrings) as well as code.
SOURCES = ("textwrap.py", "argparse.py", "difflib.py", "inspect.py", "typing.py", "pathlib.py",
           "functools.py", "collections/__init__.py", "dataclasses.py", "json/decoder.py")


def stdlib_text(max_chars: int = 1_500_000) -> str:
    """Concatenated standard-library sources (ASCII only), or a synthetic text if none are found."""
    root = Path(sysconfig.get_paths()["stdlib"])
    parts = []
    for name in SOURCES:
        path = root / name
        if path.is_file():
            parts.append(path.read_text(encoding="utf-8", errors="ignore"))
    text = "\n".join(parts) or _fallback_text()
    return text.encode("ascii", errors="ignore").decode("ascii")[:max_chars]


def _fallback_text() -> str:
    words = "the model learns to predict the next character of this text from the ones before it".split()
    return " ".join(words[(i * 7) % len(words)] for i in range(200_000))


class CharData:
    """Train/validation split of a text, as byte ids (vocab 128), sampled in fixed-size windows."""

    def __init__(self, text: str, block_size: int, val_fraction: float = 0.1, seed: int = 0) -> None:
        ids = torch.tensor(list(text.encode("ascii")), dtype=torch.long)
        n_val = int(len(ids) * val_fraction)
        self.train, self.val = ids[:-n_val], ids[-n_val:]
        self.block_size = block_size
        self.gen = torch.Generator().manual_seed(seed)

    def batch(self, batch_size: int, split: str = "train") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(inputs, targets, window start offsets); the offsets name the samples of the batch."""
        data = self.train if split == "train" else self.val
        starts = torch.randint(len(data) - self.block_size - 1, (batch_size,), generator=self.gen)
        x = torch.stack([data[s:s + self.block_size] for s in starts.tolist()])
        y = torch.stack([data[s + 1:s + 1 + self.block_size] for s in starts.tolist()])
        return x, y, starts
