"""What a batch says about itself, read without a host sync: tokens, samples, per-sample fingerprints."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_TOKEN_KEYS = ("input_ids", "tokens", "idx", "x")


def token_tensor(batch: Any) -> Any:
    """The batch's token ids: `input_ids` (or tokens/idx/x) of a dict, else the first integer tensor of at
    least two dims in a tuple or list; None when there is none."""
    if isinstance(batch, Mapping):
        for key in _TOKEN_KEYS:
            t = batch.get(key)
            if _is_int_tensor(t):
                return t
        return None
    if isinstance(batch, (list, tuple)):
        for t in batch:
            if _is_int_tensor(t) and t.dim() >= 2:
                return t
    return batch if _is_int_tensor(batch) and batch.dim() >= 2 else None


def count(tokens: Any) -> tuple[int, int]:
    """(tokens, samples) from a [batch, seq] id tensor: its shape, padding included (no sync)."""
    if tokens is None:
        return 0, 0
    return int(tokens.numel()), int(tokens.shape[0]) if tokens.dim() else 1


def fingerprints(tokens: Any) -> Any:
    """One int64 per sample, a hash of its token ids, computed on the device (no sync): the sample
    ids of a batch when the data carries none; the same sequence always gives the same number."""
    import torch

    flat = tokens.reshape(tokens.shape[0], -1).long()
    key = (flat.shape[1], flat.device)
    weights = _WEIGHTS.get(key)
    if weights is None:
        if len(_WEIGHTS) > 64:  # bounded: a few sequence lengths and devices in practice
            _WEIGHTS.clear()
        # Fixed odd multipliers (an LCG-like sequence): position-dependent, so order matters.
        ramp = torch.arange(1, key[0] + 1, device=flat.device, dtype=torch.int64)
        weights = _WEIGHTS[key] = (ramp * 0x5851F42D4C957F2D - 1) | 1
    return (flat * weights).sum(dim=1) & 0x7FFFFFFFFFFFFFFF


_WEIGHTS: dict[tuple[int, Any], Any] = {}


def _is_int_tensor(t: Any) -> bool:
    dtype = getattr(t, "dtype", None)
    return dtype is not None and hasattr(t, "dim") and not dtype.is_floating_point and not dtype.is_complex \
        and str(dtype) != "torch.bool"
