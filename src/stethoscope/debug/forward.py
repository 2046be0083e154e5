"""One pass of a batch through the user's model, the way the debug tools run it.

How a batch reaches the model: a mapping is passed as keywords (`model(**batch)`, the Hugging Face
way); a tuple or list with a `loss_fn` is `(inputs, *targets)`: the model gets the inputs (unpacked
the same way) and `loss_fn(output, *targets)` the rest; a tuple or list without one is the model's
positional arguments (`model(x, y)`, which computes its own loss, as nanoGPT's does); anything else (a
tensor) is the model's one argument. `forward(model, batch)` replaces all of this for a model that is
called in some other way.

The loss without a `loss_fn`: the model's own (a scalar output, `output.loss` or `output["loss"]`,
or the first scalar of a tuple: `(loss, logits)` or `(logits, loss)`); failing those, the sum of every
floating output, a stand-in that still sends a gradient to every parameter the outputs depend on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

Forward = Callable[[Any, Any], Any]


def call_model(model: Any, batch: Any, forward: Forward | None = None, loss_fn: Any = None) -> Any:
    """The model's output on `batch` (see the module docstring for how the batch is passed)."""
    if forward is not None:
        return forward(model, batch)
    return call_with(model, model_inputs(batch, loss_fn))


def call_with(model: Any, inputs: Any) -> Any:
    """`model(**inputs)` for a mapping, `model(*inputs)` for a tuple or list, else `model(inputs)`."""
    if isinstance(inputs, Mapping):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def model_inputs(batch: Any, loss_fn: Any = None) -> Any:
    """What the model is called with: the inputs of an `(inputs, *targets)` pair when a loss_fn takes
    the targets, else the whole batch."""
    return batch[0] if loss_fn is not None and _is_pair(batch) else batch


def loss_of(output: Any, batch: Any, loss_fn: Callable[..., Any] | None = None) -> Any:
    """The scalar to run backward from (see the module docstring)."""
    import torch

    if loss_fn is not None:
        targets = tuple(batch[1:]) if _is_pair(batch) else ()
        return loss_fn(output, *targets)
    own = _own_loss(output)
    if own is not None:
        return own
    parts = [t.float().sum() for _, t in tensors_in(output) if t.is_floating_point() and t.requires_grad]
    return torch.stack(parts).sum() if parts else None


def tensors_in(obj: Any, path: str = "", depth: int = 0) -> Iterator[tuple[str, Any]]:
    """(path, tensor) for every tensor in a nested output or batch: tensors, mappings (HF ModelOutput
    included), sequences and dataclasses."""
    import torch

    if isinstance(obj, torch.Tensor):
        yield path or "output", obj
    elif depth > 8 or isinstance(obj, (str, bytes)):
        return
    elif isinstance(obj, Mapping):
        for k, v in obj.items():
            yield from tensors_in(v, f"{path}[{k!r}]", depth + 1)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from tensors_in(v, f"{path}[{i}]", depth + 1)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from tensors_in(getattr(obj, f.name), f"{path}.{f.name}", depth + 1)


def device_type(model: Any) -> str:
    """"cuda", "cpu", … : where the model's first parameter lives (cpu for a model without any)."""
    for p in model.parameters():
        return p.device.type
    return "cpu"


@contextmanager
def autocast_to(model: Any, dtype: Any) -> Iterator[None]:
    """`torch.autocast` on the model's device type with `dtype`; nothing when dtype is None."""
    if dtype is None:
        yield
        return
    import torch

    with torch.autocast(device_type(model), dtype=dtype):
        yield


@contextmanager
def side_effects_undone(model: Any) -> Iterator[None]:
    """Run a debugging pass without leaving a trace on training: the parameters' gradients, the
    buffers (BatchNorm running statistics) and the random number generators are as they were."""
    import torch

    params = list(model.parameters())
    grads = [p.grad for p in params]
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    cuda = sorted({p.device.index or 0 for p in params if p.device.type == "cuda"})
    for p in params:
        p.grad = None
    try:
        with torch.random.fork_rng(devices=cuda):
            yield
    finally:
        for p, g in zip(params, grads):
            p.grad = g
        with torch.no_grad():
            for b, saved in buffers:
                b.copy_(saved)


def _is_pair(batch: Any) -> bool:
    return isinstance(batch, (tuple, list)) and len(batch) >= 1


def _own_loss(output: Any) -> Any:
    import torch

    def scalar(v: Any) -> bool:
        return isinstance(v, torch.Tensor) and v.numel() == 1 and v.is_floating_point()

    if scalar(output):
        return output.reshape(())
    if isinstance(output, Mapping) and scalar(output.get("loss")):
        return output["loss"].reshape(())
    loss = getattr(output, "loss", None)
    if scalar(loss):
        return loss.reshape(())
    if isinstance(output, (tuple, list)):
        return next((v.reshape(()) for v in output if scalar(v)), None)
    return None


def to_host(tensors: list[Any]) -> list[Any]:
    """Every tensor's values as Python numbers (float64; a 0-dim tensor gives a number, others nested
    lists): one transfer per device, everything on it concatenated first."""
    import torch

    out: list[Any] = [None] * len(tensors)
    by_device: dict[Any, list[int]] = {}
    for i, t in enumerate(tensors):
        by_device.setdefault(t.device, []).append(i)
    for idx in by_device.values():
        flat = torch.cat([tensors[i].detach().reshape(-1).to(torch.float64) for i in idx])
        values = flat.tolist()  # host sync: one per device
        start = 0
        for i in idx:
            n = tensors[i].numel()
            out[i] = _nest(values[start:start + n], list(tensors[i].shape))
            start += n
    return out


def _nest(flat: list[float], shape: list[int]) -> Any:
    if not shape:
        return flat[0]
    if len(shape) == 1:
        return flat
    step = len(flat) // shape[0] if shape[0] else 0
    return [_nest(flat[k * step:(k + 1) * step], shape[1:]) for k in range(shape[0])]


def bad_counts(tensors: list[Any]) -> Any:
    """A device tensor [NaN count, Inf count] over the floating tensors given, or None when none is."""
    import torch

    floats = [t.detach() for t in tensors if t.is_floating_point() or t.is_complex()]
    if not floats:
        return None
    dev = floats[0].device
    return torch.stack([torch.stack([t.isnan().sum().to(dev), t.isinf().sum().to(dev)]) for t in floats]).sum(0)


def norms(tensors: list[Any]) -> list[Any]:
    """Each tensor's 2-norm as a float64 device scalar: `torch._foreach_norm`, one fused call per device
    and dtype. float64 because a float32 sum of squares overflows from values of ~1e19 on: a huge but
    finite tensor would read as non-finite; in float64 the norm is non-finite only when a value is."""
    import torch

    out: list[Any] = [None] * len(tensors)
    groups: dict[Any, list[int]] = {}
    for i, t in enumerate(tensors):
        groups.setdefault((t.device, t.dtype), []).append(i)
    for idx in groups.values():
        for i, n in zip(idx, torch._foreach_norm([tensors[i] for i in idx], 2, dtype=torch.float64)):
            out[i] = n
    return out
