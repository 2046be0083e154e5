"""NaN/Inf in a logged training series other than the loss, the grad norm and the eval loss.

`detect.nonfinite` watches the loss, the grad norm and the eval loss. A run can log a finite loss while the
quantities it is made of are NaN: TRL's DPO logged `rewards/*`, `logps/*` and `logits/*` as nan at every record
while its loss read 2.45e9 and then exactly 0.0 (the NaN log-probabilities were masked or clamped out of the loss).
The model's forward pass is producing NaN, so nothing it outputs can be trusted. A NaN in any logged training
series is a finding; its severity is whether it is a state or a blip: `warning` once it held at `_PERSISTENT`
records of a series (or at its last record), `info` for one record that went back to finite. When the loss itself
went non-finite `detect.nonfinite` owns the incident, and nothing is added here. Evals, system and timing
series are not the model's training state and are left out.

The first logged loss is named when it is absurd next to the rest of the run (`_ABSURD` times the later median
and at least `_ABSURD_MIN`): an overflowed first batch, a loss summed and not yet averaged, or garbage inputs.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from stethoscope.detect.config import DetectConfig
from stethoscope.findings.catalogue import NAN
from stethoscope.records import EVAL_LOSS, GRAD_NORM, LOSS, Finding, StepRecord

_SKIP_PREFIXES = ("eval/", "val/", "val_", "valid", "test/", "test_", "perf/", "system/", "gpu/", "opt/", "time",
                  "timing", "mem", "throughput")
_PERSISTENT = 2  # NaN records of one series that make it a state, not a blip
_ABSURD, _ABSURD_MIN = 1e3, 1e4
_NAMED = 4  # series named in the message


class NonFiniteTermsDetector:
    """NaN/Inf in the training series that `detect.nonfinite` does not watch, while the loss stays finite."""

    name = "nonfinite_terms"

    def __init__(self, config: DetectConfig | None = None) -> None:
        self.config = config or DetectConfig()
        self._bad: dict[str, dict[str, Any]] = {}  # series -> first, last, count (NaN records), records, last_bad
        self._loss_bad = False
        self._loss: list[tuple[int, float]] = []

    def update(self, record: StepRecord) -> list[Finding]:
        for name, v in record.values.items():
            if name == LOSS:
                if v is None or not math.isfinite(v):
                    self._loss_bad = True
                elif len(self._loss) < 1000:
                    self._loss.append((record.step, float(v)))
                continue
            if name in (GRAD_NORM, EVAL_LOSS) or name.lower().startswith(_SKIP_PREFIXES) or v is None:
                continue
            s = self._bad.setdefault(name, {"first": None, "last": None, "count": 0, "records": 0, "last_bad": False})
            s["records"] += 1
            bad = not math.isfinite(v)
            s["last_bad"] = bad
            if bad:
                s["count"] += 1
                s["first"] = record.step if s["first"] is None else s["first"]
                s["last"] = record.step
        return []

    def finish(self) -> list[Finding]:
        bad = {k: s for k, s in self._bad.items() if s["count"]}
        if not bad or self._loss_bad:
            return []
        names = sorted(bad, key=lambda k: (bad[k]["first"], k))
        first = min(s["first"] for s in bad.values())
        last = max(s["last"] for s in bad.values())
        state = any(s["count"] >= _PERSISTENT or s["last_bad"] for s in bad.values())
        top = max(bad.values(), key=lambda s: s["count"])
        shown = ", ".join(names[:_NAMED]) + (f" and {len(names) - _NAMED} more" if len(names) > _NAMED else "")
        msg = (f"{shown} {'was' if len(names) == 1 else 'were'} NaN/Inf from step {first} (up to {top['count']} of "
               f"{top['records']} records{', to the last one' if top['last_bad'] else ''}) "
               "while the loss stayed finite")
        ev: dict[str, Any] = {"series": names, "first_step": first, "last_step": last, "nan_records": top["count"],
                              "records": top["records"], "loss_affected": False}
        absurd = self._absurd_start()
        if absurd is not None:
            msg += (f"; the first logged loss was {absurd[1]:.3g} at step {absurd[0]}, absurd next to the rest of "
                    "the run")
            ev["absurd_first_loss"] = absurd[1]
        msg += ("; the forward pass produces NaN that the loss does not see (masked, clamped or detached), so the "
                "model's outputs cannot be trusted" if state else "; once, and back to finite")
        causes = ["NaN in the model's forward pass (log-probabilities, logits, rewards) kept out of the loss by a "
                  "mask or a clamp", "an fp16 overflow in the outputs, or a division by a zero count in the metric"]
        fixes = ["check the first record's inputs and outputs for NaN (torch.autograd.set_detect_anomaly, a hook "
                 "printing each module's max |output|); train in bf16/fp32", "lower the LR; check the reference "
                 "model and the padding/masking of the chosen and rejected sequences"]
        return [Finding(NAN, "warning" if state else "info", first, msg, end_step=last, evidence=ev,
                        source=self.name, causes=causes, fixes=fixes)]

    def _absurd_start(self) -> tuple[int, float] | None:
        if len(self._loss) < 3:
            return None
        step, v = self._loss[0]
        later = statistics.median(abs(x) for _, x in self._loss[1:])
        return (step, v) if abs(v) >= max(_ABSURD_MIN, _ABSURD * later) else None

    def state_dict(self) -> dict[str, Any]:
        return {"bad": {k: dict(s) for k, s in self._bad.items()}, "loss_bad": self._loss_bad,
                "loss": [list(x) for x in self._loss]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._bad = {k: dict(s) for k, s in state.get("bad", {}).items()}
        self._loss_bad = bool(state.get("loss_bad", False))
        self._loss = [(int(a), float(b)) for a, b in state.get("loss", [])]
