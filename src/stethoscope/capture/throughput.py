"""Model FLOPs per token and peak device FLOP/s, for MFU.

FLOPs per token = 6·N (forward + backward over the N parameters that multiply a matrix) + 12·L·d·T
(attention scores and values, PaLM appendix B), with L layers, width d and sequence length T. N leaves
out what multiplies nothing: an input embedding (a table lookup, unless the output head shares it),
biases and norms (one add or scale per element); it is what torch.utils.flop_counter counts
(tests/capture/test_flops.py compares the two on the demo GPT and a Llama-shaped model).
"""

from __future__ import annotations

import sys
from typing import Any

# Dense bf16/fp16 tensor-core peak per device, FLOP/s (vendor datasheets, no sparsity).
PEAK_FLOPS = (
    ("gb200", 2.5e15), ("b200", 2.25e15), ("h200", 989.4e12), ("gh200", 989.4e12),
    ("h100 pcie", 756e12), ("h100", 989.4e12), ("h800", 989.4e12), ("a100", 312e12), ("a800", 312e12),
    ("l40s", 362e12), ("l40", 181e12), ("a10g", 125e12), ("a10", 125e12), ("l4", 121e12),
    ("rtx 4090", 165e12), ("rtx 3090", 71e12), ("a6000", 155e12), ("v100", 125e12), ("t4", 65e12),
    ("mi300x", 1307e12), ("mi250x", 383e12),
)

_LAYER_KEYS = ("n_layer", "num_hidden_layers", "num_layers", "n_layers")
_WIDTH_KEYS = ("n_embd", "hidden_size", "d_model", "dim")
_SEQ_KEYS = ("block_size", "max_position_embeddings", "n_positions", "seq_len", "max_seq_len")


def peak_flops_for(device_name: str) -> float | None:
    """Peak dense FLOP/s of a device from its name, or None when it is not in the table."""
    name = device_name.lower()
    for key, flops in PEAK_FLOPS:
        if key in name:
            return flops
    return None


def detect_peak_flops() -> float | None:
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    return peak_flops_for(torch.cuda.get_device_name(0))


def _config_value(config: Any, keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = config.get(key) if isinstance(config, dict) else getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def flops_per_token(model: Any, seq_len: int | None = None) -> float | None:
    """Training FLOPs per token of a torch model, or None when its shape cannot be read."""
    n_params = sum(p.numel() for p in matmul_parameters(model) if p.requires_grad)
    if n_params == 0:
        return None
    config = getattr(model, "config", None)
    layers = width = seq = None
    if config is not None:
        layers, width = _config_value(config, _LAYER_KEYS), _config_value(config, _WIDTH_KEYS)
        seq = seq_len or _config_value(config, _SEQ_KEYS)
    return training_flops_per_token(n_params, layers, width, seq)


def matmul_parameters(model: Any) -> list[Any]:
    """The parameters that multiply a matrix: every weight of two or more dimensions, less the tables that
    are only looked up (an embedding the output head does not share)."""
    from torch import nn

    lookup = (nn.Embedding, nn.EmbeddingBag)
    owners: dict[int, bool] = {}  # parameter id -> used by a module other than a lookup table
    for module in model.modules():
        for p in module.parameters(recurse=False):
            owners[id(p)] = owners.get(id(p), False) or not isinstance(module, lookup)
    return [p for p in model.parameters() if p.dim() >= 2 and owners.get(id(p), True)]


def training_flops_per_token(n_params: int, layers: int | None = None, width: int | None = None,
                             seq_len: int | None = None) -> float:
    """6·N + 12·L·d·T (the attention term only when the shape is known), N the parameters that multiply a
    matrix; shared with `estimate mfu`."""
    attention = 12.0 * layers * width * seq_len if layers and width and seq_len else 0.0
    return 6.0 * n_params + attention
