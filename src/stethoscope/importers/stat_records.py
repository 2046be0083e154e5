"""Records whose every value is a statistic's summary: StyleGAN2/3-ADA's and NVIDIA EDM's `stats.jsonl`
(`torch_utils.training_stats`), a line a tick of `{"Loss/G/loss": {"num": 32, "mean": 3.48, "std": 0.89},
"Progress/kimg": {"num": 1, "mean": 4.03, "std": 0}, ...}`.

A summary's value is its mean (what the trainer's own TensorBoard writes). The step is the thousands of
images shown, as the trainer's TensorBoard numbers it (`global_step = int(cur_nimg / 1e3)`), else the tick.
`Loss/G/loss` and `Loss/D/loss` are the generator's and the discriminator's losses; EDM's `Loss/loss` is
the train loss (the names' own rule).
"""

from __future__ import annotations

from typing import Any

from stethoscope.logtext.table import to_float

_SUMMARY = frozenset({"num", "mean"})  # `std` beside them (a summary of one value has std 0)
_PROGRESS = ("Progress/kimg", "Progress/tick")
_NETWORKS = {"Loss/G/loss": "loss_g", "Loss/D/loss": "loss_d"}  # two networks' objectives, no train loss


def is_summary(value: Any) -> bool:
    """Whether `value` is a statistic's summary (`{"num": 32, "mean": 3.48, "std": 0.89}`)."""
    return isinstance(value, dict) and _SUMMARY <= value.keys() and value.keys() <= _SUMMARY | {"std"}


def summarised(flat: dict[str, Any]) -> dict[str, Any]:
    """A record flattened (summaries to their means) with its step under `step` when its progress gives one,
    the GAN's two losses under the names the console readers give them."""
    if "step" in flat or not any(key in flat for key in _PROGRESS):
        return flat
    out = {_NETWORKS.get(key, key): value for key, value in flat.items()}
    kimg, tick = to_float(flat.get(_PROGRESS[0])), to_float(flat.get(_PROGRESS[1]))
    step = int(kimg) if kimg is not None else tick
    if step is not None:
        out["step"] = step
    return out
