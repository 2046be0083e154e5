"""What the fields of a Megatron-family iteration record mean in our vocabulary."""

from __future__ import annotations

import re

from stethoscope.logtext.names import normalize
from stethoscope.records import EVAL_LOSS, GRAD_NORM, LOSS, LOSS_SCALE, LR, PARAM_NORM, SAMPLES_PER_S, STEP_TIME, TFLOPS

LOSS_MISSING = "train/loss_missing"
GLOBAL_BATCH = "train/global_batch_size"
GLOBAL_BATCH_KEY = "global batch size"
COUNTER_KEYS = ("number of skipped iterations", "number of nan iterations")
# Fields that Megatron prints after the losses: seeing one means the loss field was really absent.
AFTER_LOSS = frozenset({"loss scale", "grad norm", "num zeros", "params norm", "number of skipped iterations",
                        "number of nan iterations", "samples per second", "tflops"})

_NUMBER = re.compile(r"\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf(?:inity)?))\s*([A-Za-z/%]*)",
                     re.IGNORECASE)
_FLOP_UNITS = {"": 1e-12, "k": 1e-9, "m": 1e-6, "g": 1e-3, "t": 1.0, "p": 1e3}
_FIXED = {"learning rate": LR, "loss scale": LOSS_SCALE, "grad norm": GRAD_NORM, "params norm": PARAM_NORM,
          "samples per second": SAMPLES_PER_S, "samples/sec": SAMPLES_PER_S,
          "tokens per gpu per second (tgs)": "perf/tokens_per_s_per_gpu", "skipped samples": "train/skipped_samples",
          "num zeros": None, "consumed samples": None, "consumed tokens": None}


def field_name(key: str, unit: str = "") -> tuple[str | None, float]:
    """(our name, factor) for an iteration-record field (lower-case key, the unit glued to its value);
    (None, 1) for a field we leave out."""
    if key.startswith("elapsed time per iteration"):
        return STEP_TIME, 0.001 if "(ms)" in key else 1.0
    if key in ("lm loss", "lm_loss", "loss", "reduced_train_loss"):  # NeMo 2's printer: the train loss averaged
        return LOSS, 1.0  # over the data-parallel ranks (`| global_step: 10 | reduced_train_loss: 10.77 |`)
    if key.endswith("loss"):
        return f"train/{normalize(key)}", 1.0
    if "flop" in key:
        return TFLOPS, _FLOP_UNITS.get(unit[:1].lower(), 1.0) if "flops" in unit.lower() else 1.0
    if key in _FIXED:
        return _FIXED[key], 1.0
    return normalize(key), 1.0


def eval_name(key: str, namespace: str) -> str:
    """Our name for a field of a `validation loss at …` record."""
    key = " ".join(key.split()).lower()
    if key in ("lm loss value", "lm_loss value", "lm loss", "loss value"):
        return EVAL_LOSS if namespace == "eval" else f"{namespace}/loss"
    if key.endswith("ppl") or key.endswith("ppl value"):
        return f"{namespace}/ppl"
    return f"{namespace}/{normalize(key.removesuffix(' value'))}"


def number(text: str) -> tuple[float, str] | None:
    """(value, unit glued to it) of a field's text (`2.1E+00`, `5.7TFLOPS`, `nan`), or None."""
    m = _NUMBER.match(text)
    if m is None or text[m.end():].strip():
        return None
    return float(m.group(1)), m.group(2)
