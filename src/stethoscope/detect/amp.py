"""fp16 dynamic loss scale: collapse (scale fallen to `min_loss_scale` or below it) and overflow storms.

A scaler halves the scale on every overflowing step and doubles it after a quiet window, so an
occasional halving is routine. `loss_scale_storm_halvings` halvings within
`loss_scale_storm_steps` steps are an overflow storm (warning: the gradients overflow step after
step); a scale below `min_loss_scale` (default 1), or fallen to it, has collapsed (error: every step is
being skipped; a scale that sits at 1.0 from the first record is bf16/fp32 printing a unit scale; OPT-175B restarted from a checkpoint whose scale was still >= 1). One incident per storm;
it ends when the scale has doubled back above where the storm took it.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from stethoscope.detect.config import DetectConfig
from stethoscope.findings.catalogue import LOSS_SCALE_COLLAPSE
from stethoscope.records import LOSS_SCALE, Finding, StepRecord


class LossScaleDetector:
    """Loss-scale collapse and overflow storms in fp16 training."""

    name = "amp"

    def __init__(self, config: DetectConfig | None = None) -> None:
        self.config = config or DetectConfig()
        self._prev: float | None = None
        self._drops: deque[tuple[int, float]] = deque(maxlen=64)  # (step, halvings)
        self._open: dict[str, Any] | None = None
        self._rise: int | None = None  # the last step where the scale grew

    def update(self, record: StepRecord) -> list[Finding]:
        scale = record.values.get(LOSS_SCALE)
        if scale is None or not math.isfinite(scale):
            return []
        step = record.step
        prev, self._prev = self._prev, scale
        if prev is not None and scale > prev:
            self._rise = step
        if prev is not None and scale < prev and scale > 0:
            self._drops.append((step, math.log2(prev / scale)))
        elif prev is not None and scale < prev:
            self._drops.append((step, 64.0))
        inc = self._open
        if inc is not None:
            return self._progress(inc, step, scale)
        return self._check(step, scale, prev)

    def finish(self) -> list[Finding]:
        inc, self._open = self._open, None
        if inc is None:
            return []
        f = self._finding(inc)
        f.end_step = inc["last_step"]
        f.message += f"; scale still {inc['last']:.4g} at the last record"
        return [f]

    def _check(self, step: int, scale: float, prev: float | None) -> list[Finding]:
        cfg = self.config
        window = [(s, h) for s, h in self._drops if step - s < cfg.loss_scale_storm_steps]
        halvings = sum(h for _, h in window)
        collapsed = scale < cfg.min_loss_scale or (scale == cfg.min_loss_scale and halvings > 0)
        if not collapsed and halvings < cfg.loss_scale_storm_halvings - 1e-9:
            return []
        if collapsed:  # the collapse began with the first halving of the descent that led here
            window = self._descent(step)
            halvings = sum(h for _, h in window)
        start = window[0][0] if window else step
        before = scale * 2 ** halvings if window else (prev if prev is not None else scale)
        self._open = {
            "start": start, "before": before, "last": scale, "low": scale, "last_step": step,
            "halvings": halvings, "collapsed": collapsed,
        }
        return [self._finding(self._open)]

    def _descent(self, step: int) -> list[tuple[int, float]]:
        """The halvings that led to `step` with no rise in between and no gap longer than a storm window."""
        out: list[tuple[int, float]] = []
        last = step
        for s, h in reversed(self._drops):
            if last - s > self.config.loss_scale_storm_steps or (self._rise is not None and s <= self._rise):
                break
            out.append((s, h))
            last = s
        return out[::-1]

    def _progress(self, inc: dict[str, Any], step: int, scale: float) -> list[Finding]:
        inc["last"], inc["last_step"] = scale, step
        out: list[Finding] = []
        if scale < inc["low"]:
            inc["halvings"] += math.log2(inc["low"] / scale) if scale > 0 else 64.0
            inc["low"] = scale
            if scale <= self.config.min_loss_scale and not inc["collapsed"]:  # it fell there
                inc["collapsed"] = True
                out.append(self._finding(inc))
            return out
        if scale >= 2 * inc["low"] and scale > self.config.min_loss_scale:
            self._open = None
            self._drops.clear()
            f = self._finding(inc)
            f.end_step = step
            f.message += f"; the scale grew back to {scale:.4g} by step {step}"
            out.append(f)
        return out

    def _finding(self, inc: dict[str, Any]) -> Finding:
        ev = {"scale_before": inc["before"], "scale_low": inc["low"], "halvings": inc["halvings"],
              "collapsed": inc["collapsed"]}
        if inc["collapsed"]:
            fell = (f"collapsed to {inc['low']:.4g} (from {inc['before']:.4g}, starting at step {inc['start']})"
                    if inc["low"] < inc["before"] else f"stayed at {inc['low']:.4g} from step {inc['start']}")
            msg = (f"fp16 loss scale {fell}: gradients overflow on every step and the updates are being skipped")
            return Finding(LOSS_SCALE_COLLAPSE, "error", inc["start"], msg, evidence=ev, source=self.name)
        msg = (f"overflow storm: the fp16 loss scale halved {inc['halvings']:.0f} times from step {inc['start']} "
               f"({inc['before']:.4g} -> {inc['low']:.4g}): gradients overflow step after step")
        return Finding(LOSS_SCALE_COLLAPSE, "warning", inc["start"], msg, evidence=ev, source=self.name)

    def state_dict(self) -> dict[str, Any]:
        return {"prev": self._prev, "drops": [list(d) for d in self._drops], "open": self._open, "rise": self._rise}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._prev = state.get("prev")
        self._drops = deque((tuple(d) for d in state.get("drops", [])), maxlen=64)  # type: ignore[misc]
        self._open = state.get("open")
        self._rise = state.get("rise")
