"""Model FLOPs utilization from a model's shape and a throughput: FLOPs per token by the Monitor's
formula (6·N + 12·L·d·T, N the parameters that multiply a matrix: capture/throughput.py), peak FLOP/s
from the same table."""

from __future__ import annotations

from typing import Any

from stethoscope.capture.throughput import training_flops_per_token
from stethoscope.errors import UsageError
from stethoscope.debug.estimate.gpus import Gpu
from stethoscope.debug.estimate.shape import ModelShape


def mfu(shape: ModelShape | int, seq: int, tokens_per_s: float, gpu: Gpu, gpus: int = 1) -> dict[str, Any]:
    """MFU of `gpus` GPUs processing `tokens_per_s` tokens per second in all, and the tokens/s that
    common MFU levels would mean. From a parameter count alone (`shape` an int) the FLOPs are 6·N with
    every parameter in a matrix multiply and no attention term (the common approximation; `note` says so)."""
    if seq < 1 or gpus < 1:
        raise UsageError(f"--seq and --gpus must be positive, got {seq} and {gpus}")
    if not tokens_per_s > 0:
        raise UsageError(f"tokens per second must be positive, got {tokens_per_s}")
    note = None
    if isinstance(shape, int):
        n = params = active = shape
        per_token = 6.0 * n
        note = ("6·N from the parameter count alone: the attention's 12·L·d·T and the embedding lookup are "
                "not separated; add --layers and --hidden (or give a config.json) for them")
    else:
        n = shape.matmul_params  # the experts a token is routed to; no lookup table (input embedding, positions)
        params, active = shape.params, shape.active_params
        per_token = training_flops_per_token(n, shape.layers, shape.hidden, seq)
    achieved = tokens_per_s * per_token / gpus
    return {"flops_per_token": per_token, "dense_flops_per_token": 6.0 * n,
            "attention_flops_per_token": per_token - 6.0 * n, "params": params, "note": note,
            "active_params": active, "matmul_params": n,
            "tokens_per_s": tokens_per_s, "gpus": gpus, "gpu": gpu.name, "peak_flops": gpu.peak_flops,
            "achieved_flops_per_gpu": achieved, "mfu": achieved / gpu.peak_flops,
            "tokens_per_s_at": {f"{int(level * 100)}%": level * gpu.peak_flops * gpus / per_token
                                for level in (0.3, 0.4, 0.5)}}
