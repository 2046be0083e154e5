"""A batch taken apart into its examples: per-example losses and fully masked label rows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stethoscope.debug.forward import (
    Forward,
    autocast_to,
    call_model,
    loss_of,
    tensors_in,
    to_host,
)

IGNORE_INDEX = -100  # the label value PyTorch's and Hugging Face's losses skip


def batch_size(batch: Any) -> int | None:
    """The leading dimension shared by the batch's tensors (their first one's), or None."""
    for _, t in tensors_in(batch):
        if t.dim() >= 1:
            return int(t.shape[0])
    return None


def example(batch: Any, i: int, n: int) -> Any:
    """Example `i` of a batch of `n` (every tensor with leading dimension n sliced to i:i+1)."""
    import torch

    if isinstance(batch, torch.Tensor):
        return batch[i:i + 1] if batch.dim() >= 1 and batch.shape[0] == n else batch
    if isinstance(batch, Mapping):
        return {k: example(v, i, n) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(example(v, i, n) for v in batch) if not hasattr(batch, "_fields") else \
            type(batch)(*(example(v, i, n) for v in batch))
    return batch


def example_losses(model: Any, batch: Any, loss_fn: Any = None, forward: Forward | None = None,
                   autocast: Any = None, limit: int = 64) -> list[float] | None:
    """The loss of each of the first `limit` examples with the current weights (no gradients), or None
    when the batch has no leading dimension to split."""
    import torch

    n = batch_size(batch)
    if not n:
        return None
    losses = []
    with torch.no_grad(), autocast_to(model, autocast):
        for i in range(min(n, limit)):
            one = example(batch, i, n)
            loss = loss_of(call_model(model, one, forward, loss_fn), one, loss_fn)
            if not isinstance(loss, torch.Tensor):
                return None
            losses.append(loss.detach().float().reshape(()))
    return to_host(losses) if losses else None


def masked_rows(batch: Any) -> tuple[list[int], int] | None:
    """(examples whose labels are all -100, examples) for a batch with integer labels (`batch["labels"]`
    or the targets of an (inputs, targets) pair), or None when it has none."""
    import torch

    labels = None
    if isinstance(batch, Mapping):
        labels = batch.get("labels")
    elif isinstance(batch, (list, tuple)) and len(batch) >= 2:
        labels = batch[1]
    if not isinstance(labels, torch.Tensor) or labels.is_floating_point() or labels.dim() < 1:
        return None
    rows = labels.reshape(labels.shape[0], -1)
    all_masked = (rows == IGNORE_INDEX).all(1)
    flags = to_host([all_masked])[0]
    return [i for i, f in enumerate(flags) if f], len(flags)


def example_scales(batch: Any) -> dict[str, list[float]] | None:
    """Per example, from the model's inputs: "rms", the largest root-mean-square of its floating
    tensors (a sample scaled x100 stands out), and "length", its non-padding tokens (the attention
    mask's sum). None when the batch has neither."""
    import torch

    n = batch_size(batch)
    if not n:
        return None
    inputs = batch[0] if isinstance(batch, (tuple, list)) else batch
    rms, length = [], None
    for _, t in tensors_in(inputs):
        if t.dim() >= 1 and t.shape[0] == n and t.numel() > 0 and t.is_floating_point():
            rms.append(t.detach().float().reshape(n, -1).pow(2).mean(1).sqrt())
    if isinstance(inputs, Mapping) and isinstance(inputs.get("attention_mask"), torch.Tensor):
        length = inputs["attention_mask"].reshape(n, -1).sum(1).float()
    parts = ([torch.stack(rms).amax(0)] if rms else []) + ([length] if length is not None else [])
    if not parts:
        return None
    host = to_host(parts)
    out = {}
    if rms:
        out["rms"] = host.pop(0)
    if length is not None:
        out["length"] = host.pop(0)
    return out
