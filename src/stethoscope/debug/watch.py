"""The Monitor's opt-in NaN locator: when a non-finite loss or grad norm reaches the store, re-run that
step's batch through `locate_nonfinite` and record the report as a `debug` event.

It runs on the training thread, inside the flush that first sees the non-finite value on the host
(no extra host sync: the flush transfers the values anyway). What it keeps: nothing by default. With
`Monitor(debug_nonfinite=True)` and `mon.step(..., batch=b)` it holds references to the batches of
the steps not yet flushed (at most `log_every` of them; each flush lets them go), and none after
`max_reports` reports. `batch=` may be a zero-argument callable that rebuilds the batch, and
`NonfiniteWatch(batch_for_step=fn)` fetches the batch of a step only when needed: nothing is held.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stethoscope import records as R

log = logging.getLogger(__name__)

WATCHED = (R.LOSS, R.GRAD_NORM)
EVENT_KIND = "debug"
SOURCE = "debug.locate_nonfinite"


@dataclass
class NonfiniteWatch:
    """Options of `Monitor(debug_nonfinite=NonfiniteWatch(...))` (`True` means the defaults)."""

    loss_fn: Callable[..., Any] | None = None
    """As in `locate_nonfinite`: how the batch's loss is computed (default: the model's own)."""
    forward: Callable[[Any, Any], Any] | None = None
    """`forward(model, batch)` for a model called some other way."""
    autocast: Any = None
    """The dtype the training runs under `torch.autocast` with (the re-run happens outside the loop's context)."""
    batch_for_step: Callable[[int], Any] | None = None
    """Fetch the batch of a step on demand (a deterministic data pipeline): no batch is held meanwhile."""
    max_reports: int = 1
    """Reports per run; after the last one no batch is held any more."""

    def __post_init__(self) -> None:
        if self.max_reports < 1:
            raise ValueError(f"max_reports must be >= 1, got {self.max_reports}")


class NonfiniteLocator:
    """The Monitor's side of it: `note` each step's batch, `check` each flush's host values."""

    def __init__(self, options: NonfiniteWatch, model: Any, scaler: Any,
                 write_events: Callable[[list[Any]], None]) -> None:
        if model is None:
            raise ValueError("debug_nonfinite needs the model: Monitor(run_dir, model=model, ..., debug_nonfinite=True)")
        self.options = options
        self.model = _bare(model)
        self.scaler = scaler
        self.write_events = write_events
        self.reports: list[Any] = []
        self._batches: dict[int, Any] = {}
        self._done = False

    def note(self, step: int, batch: Any) -> None:
        """Hold `batch` (or the callable that rebuilds it) until the flush that covers `step`."""
        if batch is not None and not self._done:
            self._batches[step] = batch

    def check(self, rows: list[tuple[str, int, Any, float]]) -> None:
        """Look at one flush's host values; on the first non-finite loss/grad norm, locate and record."""
        batches, self._batches = self._batches, {}
        if self._done:
            return
        bad = next((step for name, step, v, _ in rows if name in WATCHED and not math.isfinite(float(v))), None)
        if bad is None:
            return
        self._locate(bad, batches.get(bad))
        self._done = len(self.reports) >= self.options.max_reports

    def _locate(self, step: int, batch: Any) -> None:
        opts = self.options
        try:
            if batch is None and opts.batch_for_step is not None:
                batch = opts.batch_for_step(step)
            elif callable(batch):
                batch = batch()
            if batch is None:
                self.reports.append(None)
                self._event(step, "warning", f"non-finite loss/grad norm at step {step}: no batch to re-run (pass "
                            "batch= to mon.step, or NonfiniteWatch(batch_for_step=...))", {})
                return
            from stethoscope.debug.nonfinite import locate_nonfinite

            report = locate_nonfinite(self.model, batch, opts.loss_fn, forward=opts.forward, autocast=opts.autocast,
                                      loss_scale=self._loss_scale())
        except Exception as exc:  # noqa: BLE001 - the user's model may raise on the bad batch; never into training
            self.reports.append(None)
            self._event(step, "warning", f"locate_nonfinite failed on the batch of step {step}: "
                        f"{type(exc).__name__}: {exc}", {"error": repr(exc)})
            return
        report.step = step
        self.reports.append(report)
        log.warning("stethoscope: non-finite value at step %d, its batch re-run:\n%s", step, report)
        self._event(step, "critical" if report.found else "info", f"step {step}: {report.verdict}", report.to_dict())

    def _loss_scale(self) -> float | None:
        s = self.scaler
        if s is None or not s.is_enabled():
            return None
        return float(s.get_scale())  # host sync: once, on a non-finite step

    def _event(self, step: int, severity: str, message: str, data: dict[str, Any]) -> None:
        self.write_events([(step, time.time(), EVENT_KIND, severity, SOURCE, message, data)])


def locator(spec: Any, model: Any, scaler: Any, write_events: Callable[[list[Any]], None]) -> NonfiniteLocator:
    """The Monitor's locator for `debug_nonfinite=` (True or a NonfiniteWatch)."""
    if spec is True:
        spec = NonfiniteWatch()
    if not isinstance(spec, NonfiniteWatch):
        raise ValueError(f"debug_nonfinite must be True, False or a stethoscope.debug.NonfiniteWatch, got {spec!r}")
    return NonfiniteLocator(spec, model, scaler, write_events)


def _bare(model: Any) -> Any:
    """The module inside a DistributedDataParallel wrapper (its backward would wait for the other ranks)."""
    import torch

    return model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model
