"""What a checkpoint holds besides the user's objects: RNG states.

Everything here is saved with `torch.save` and must load with `torch.load(weights_only=True)`: only
tensors, dicts, lists, tuples, strings and numbers (numpy's RNG key travels as a tensor).
"""

from __future__ import annotations

import math
import random
import sys
from typing import Any


def rng_state() -> dict[str, Any]:
    """Python, numpy (when loaded), torch and CUDA (when initialised) generator states."""
    import torch

    out: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    np = sys.modules.get("numpy")
    if np is not None:
        s = np.random.get_state(legacy=False)
        out["numpy"] = {"bit_generator": s["bit_generator"], "key": torch.from_numpy(s["state"]["key"].copy()),
                        "pos": int(s["state"]["pos"]), "has_gauss": int(s["has_gauss"]), "gauss": float(s["gauss"])}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["cuda"] = torch.cuda.get_rng_state_all()
    return out


def set_rng_state(state: dict[str, Any]) -> None:
    import torch

    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    torch.set_rng_state(state["torch"])
    if "numpy" in state:
        import numpy as np

        s = state["numpy"]
        np.random.set_state({"bit_generator": s["bit_generator"], "has_gauss": s["has_gauss"], "gauss": s["gauss"],
                             "state": {"key": s["key"].numpy().astype(np.uint32), "pos": s["pos"]}})
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])



def finite(loss: Any) -> bool:
    """Whether a step's loss (tensor, number or None) is finite; True when it cannot tell."""
    try:
        if hasattr(loss, "detach"):
            return bool(loss.detach().isfinite().all().item())  # host sync: only when a save is due
        return loss is None or math.isfinite(float(loss))
    except (TypeError, ValueError, RuntimeError):
        return True
