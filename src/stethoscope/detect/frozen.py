"""What an unchanging loss value means: how many digits make a repeat unlikely, when a tiny change is
none (a frozen model's loss still drifts in its last float digits), and the uniform-guess level."""

from __future__ import annotations

import math

SAME_IN_NOISE = 1e-3
"""A change this many times the record-to-record noise (`stats.diff_sigma`) or less is no change: with its weights
frozen, a model's epoch-average loss still moves in the 6th-7th digit (Adam's momentum running out, float32
sums taken in another order), while a learning run's loss moves by about its noise. On a loss printed at 4
decimals, a merge needs a noise of 0.1 and three records within one printed unit of each other."""
SAME_REL = 1e-5
"""...and at most this fraction of the value (the drift in its 6th digit): after a divergence the noise is huge,
and a loss that wanders by a thousandth of it is still moving."""


_CHANCE = 0.01  # how likely a run of repeated prints may be, by chance, anywhere in the log


def decimals(v: float) -> int:
    """Decimal places in the shortest repr of `v`: how precisely the log printed it (0.834 -> 3)."""
    text = repr(abs(v)).lower()
    if "e" in text:
        mant, exp = text.split("e")
        return max(0, (len(mant.split(".")[1]) if "." in mant else 0) - int(exp))
    return len(text.split(".")[1]) if "." in text else 0


def repeats_needed(v: float, sigma: float, records: int, minimum: int) -> int:
    """Records in a row showing `v` before the repeat is no coincidence of the print: two successive prints of a
    loss with noise `sigma` (per record) agree by chance with p ~ resolution / (sigma * 2 sqrt(pi)), so k in a row
    somewhere in `records` with about p^(k-1) * records; under `_CHANCE`. A 3-decimal print of a loss with noise
    0.02 needs 4; a full-precision float, `minimum`; a print as coarse as the noise, never."""
    if sigma <= 0 or not math.isfinite(sigma):
        return minimum
    p = min(0.9, 10.0 ** -decimals(v) / (sigma * 3.545))
    if p <= 0:
        return minimum
    return max(minimum, 1 + math.ceil(math.log(_CHANCE / max(records, 1)) / math.log(p)))


def sig_digits(v: float) -> int:
    """Significant digits in the shortest repr of `v` (11.0666 -> 6): how unlikely an exact repeat is."""
    text = repr(abs(v)).lower()
    if "e" in text:
        text = text.split("e")[0]
    digits = text.replace(".", "").lstrip("0")
    return len(digits.rstrip("0")) if "." not in text else len(digits)


def uniform_note(level: float, vocab_size: int | None) -> str | None:
    """'equals ln(V)': the loss of a model that predicts uniformly over the vocabulary."""
    if vocab_size is not None:
        ln_v = math.log(vocab_size)
        if abs(level - ln_v) <= 0.05 * ln_v:
            return f"that is ln(vocab={vocab_size}) = {ln_v:.4g}: uniform predictions, the model outputs nothing learned"
        return None
    if 6.9 <= level <= 12.5:  # ln(1k) .. ln(270k): the range of real vocabularies
        return (f"that equals ln({math.exp(level):,.0f}): the loss of a uniform guess over a vocabulary of "
                "that size, i.e. no learning at all")
    return None
