"""Step time, data wait, samples/s, tokens/s, TFLOP/s and MFU, from the wall clock between `Monitor.step` calls.

A step's time runs from the end of one `Monitor.step` call to the next. The model's forward pre-hook marks
when compute began: the time before it is the data wait. Work the Monitor itself does after a step
(checkpoint saves, rollbacks: capture/own_work.py) is taken out with `exclude`.
"""

from __future__ import annotations

import time
from typing import Any

from stethoscope import records as R
from stethoscope.capture.throughput import detect_peak_flops, flops_per_token


class StepTiming:
    """The clock between steps, and the throughput figures it gives (no host sync: plain floats)."""

    def __init__(self, model: Any, tokens_per_step: int | None, samples_per_step: int | None,
                 seq_len: int | None, peak_flops: float | None) -> None:
        self.tokens_per_step, self.samples_per_step = tokens_per_step, samples_per_step
        self.flops_per_token = flops_per_token(model, seq_len) if model is not None else None
        self.peak_flops = peak_flops or detect_peak_flops()
        self.last_call: float | None = None
        self.compute_start: float | None = None
        self._hook = model.register_forward_pre_hook(self._on_forward) if model is not None else None

    def _on_forward(self, *_: Any) -> None:
        if self.compute_start is None:
            self.compute_start = time.perf_counter()

    def capture(self, values: dict[str, Any], now: float, last_call: float | None, compute_start: float | None,
                tokens: int | None, samples: int | None) -> None:
        """The step that ended `now` (the clock's `last_call` and `compute_start` then): its time, data wait and
        throughput into `values`."""
        if last_call is None:
            return
        dt = now - last_call
        values[R.STEP_TIME] = dt
        if compute_start is not None:
            values[R.DATA_WAIT] = max(0.0, compute_start - last_call)
        tokens = tokens if tokens is not None else self.tokens_per_step
        samples = samples if samples is not None else self.samples_per_step
        if dt <= 0:
            return
        if samples:
            values[R.SAMPLES_PER_S] = samples / dt
        if tokens:
            self._tokens(values, tokens / dt)

    def _tokens(self, values: dict[str, Any], tps: float) -> None:
        values[R.TOKENS_PER_S] = tps
        if self.flops_per_token:
            values[R.TFLOPS] = tps * self.flops_per_token / 1e12
            if self.peak_flops:
                values[R.MFU] = tps * self.flops_per_token / self.peak_flops

    def restart(self) -> None:
        """The step call is over: the next step's time starts now."""
        self.last_call, self.compute_start = time.perf_counter(), None

    def exclude(self, seconds: float) -> None:
        """Time the Monitor spent on its own work after a step: not the next step's."""
        if self.last_call is not None:
            self.last_call += seconds

    def remove(self) -> None:
        if self._hook is not None:
            self._hook.remove()
