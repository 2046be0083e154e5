"""The steps' values waiting for the flush: one host transfer for all their tensors, then the writer's queue.

`Monitor.step` appends a step's values here (tensors detached, not read). A flush, every `log_every`
steps or half the flush interval, reads every pending tensor back in one batched transfer, derives the
clip coefficient, hands the points to the record writer, and samples the host and device every
`system_every` seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from stethoscope import records as R
from stethoscope.capture.system import HostStats, default_device_memory, device_metrics
from stethoscope.capture.tensors import ids_to_host, to_host
from stethoscope.config import MonitorConfig


class Pending:
    """The pending values and batch ids of one Monitor, and its flush."""

    def __init__(self, recorder: Any, settings: MonitorConfig, max_grad_norm: float | None, scaler: Any,
                 device_memory: Any, nonfinite: Any, layout: Callable[[tuple[Any, ...]], dict[str, Any]]) -> None:
        self.recorder, self.settings, self.layout = recorder, settings, layout
        self.max_grad_norm, self.scaler, self.nonfinite = max_grad_norm, scaler, nonfinite
        self.values: list[tuple[int, float, Any]] = []  # (step, time, values: a dict, or a step's facts to lay out)
        self.batches: list[tuple[int, Any]] = []
        self.last_flush = time.perf_counter()
        self._last_system = 0.0
        self._host = HostStats()
        self._device_memory = device_memory if device_memory is not None else default_device_memory()

    def add(self, step: int, values: dict[str, Any] | tuple[Any, ...], batch_ids: Any = None) -> None:
        """A step's values, or its facts (a tuple) that `layout` turns into its values at the flush."""
        self.values.append((step, time.time(), values))
        if batch_ids is not None:
            self.batches.append((step, batch_ids))

    def due(self, now: float) -> bool:
        """Whether to flush after the step that ended `now`."""
        s = self.settings
        return len(self.values) >= s.log_every or now - self.last_flush >= s.flush_interval / 2

    def flush(self, last_step: int | None) -> None:
        self.last_flush = time.perf_counter()
        pending, self.values = self.values, []
        if pending:
            self._put_values(pending)
        if self.batches:
            batches, self.batches = self.batches, []
            steps = [s for s, _ in batches]
            # every log_every steps: woken at once, the writer would take the GIL from the training thread
            # 10-20 times a second on short steps; at its next interval it writes them with the points
            self.recorder.call("write_batches", list(zip(steps, ids_to_host([ids for _, ids in batches]))),
                               wake=False)
        # no step yet (a resume restores state before its first step): a sample now would be stamped step 0
        if last_step is not None and self.last_flush - self._last_system >= self.settings.system_every:
            self._last_system = self.last_flush
            self._sample_system(last_step)

    def _put_values(self, pending: list[tuple[int, float, dict[str, Any]]]) -> None:
        # The steps' dicts go to the writer as they are (one queue item a step, spread into columns there in C);
        # only the tensors are replaced, by their values from one transfer, and ints made floats.
        layout = self.layout
        for i, (step, wall, values) in enumerate(pending):
            if type(values) is tuple:
                pending[i] = (step, wall, layout(values))
        tensors: list[Any] = []
        where: list[tuple[dict[str, Any], str]] = []
        for _, _, values in pending:
            for name, v in values.items():
                if type(v) is not float:
                    if type(v) is int:
                        values[name] = float(v)  # an existing key: the dict does not change size
                    else:
                        tensors.append(v)
                        where.append((values, name))
        for (values, name), v in zip(where, to_host(tensors) if tensors else ()):
            values[name] = v
        clip = self.max_grad_norm
        put = self.recorder.queue.put_batch
        for i, (step, wall, values) in enumerate(pending):
            if clip and R.GRAD_NORM in values:
                values = _with_clip_coef(values, clip)
                pending[i] = (step, wall, values)
            put((step, wall, values), len(values))
        if self.nonfinite is not None:
            self.nonfinite.check([(name, step, v, wall) for step, wall, values in pending for name, v in values.items()])

    def _sample_system(self, step: int) -> None:
        values = self._host.sample()
        if self._device_memory is not None:
            values.update(device_metrics(self._device_memory))
        if self.scaler is not None and self.scaler.is_enabled():
            values[R.LOSS_SCALE] = float(self.scaler.get_scale())  # host sync: once per system sample
        self.recorder.put_many(values, step, time.time())


def _with_clip_coef(values: dict[str, Any], max_norm: float) -> dict[str, Any]:
    """`values` with the clip coefficient of its grad norm right after it (where the rows had it)."""
    out: dict[str, Any] = {}
    for name, v in values.items():
        out[name] = v
        if name == R.GRAD_NORM:
            out[R.GRAD_CLIP_COEF] = min(1.0, max_norm / (v + 1e-6))
    return out
