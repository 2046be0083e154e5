"""Live export: the writer thread's durable points (and the findings raised on them) to the exporters.

`LiveExport` is the last stage of the Monitor's observer chain (capture/observers.py), so it gets the
points and every finding the stages before it returned. Cheap exporters (`inline = True`: Prometheus sets a few
gauges) run on the writer thread; the others (TensorBoard, W&B, MLflow: file or network I/O) run on one
export thread behind a bounded queue, so a slow tool never slows the writer, let alone training. A
full queue drops and counts. Nothing here raises: a failing exporter is logged once and counted.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections import deque
from collections.abc import Sequence
from typing import Any

from stethoscope.exporters.base import ExportContext, Point, make
from stethoscope.records import Finding

log = logging.getLogger(__name__)


class LiveExport:
    """A stage of the Monitor's observer chain (`see`, `end`) forwarding to exporters."""

    def __init__(self, exporters: Sequence[Any], max_batches: int = 10_000) -> None:
        self.exporters = list(exporters)
        self.prometheus_url: str | None = next((e.url for e in self.exporters if getattr(e, "url", None)), None)
        """Where Prometheus scrapes this rank (`http://127.0.0.1:PORT/metrics`), or None."""
        self.errors = 0
        self.dropped = 0
        self._inline = [e for e in self.exporters if getattr(e, "inline", False)]
        self._queued = [e for e in self.exporters if not getattr(e, "inline", False)]
        self._queue: deque[tuple[list[Point], list[Finding]] | threading.Event] = deque()
        self._max = max_batches
        self._wake = threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None
        if self._queued:
            self._thread = threading.Thread(target=self._run, name="stethoscope-export", daemon=True)
            self._thread.start()

    # -- writer-thread side ----------------------------------------------------------------------
    def see(self, points: Sequence[Point], findings: list[Finding]) -> list[Finding]:
        """The last stage of the Monitor's observer chain (capture/observers.py): the points and the
        findings every stage before it passed on."""
        self._forward(list(points), findings)
        return findings

    def end(self, findings: list[Finding]) -> list[Finding]:
        self._forward([], findings)
        self.close()
        return findings

    def _forward(self, points: list[Point], findings: list[Finding]) -> None:
        if not points and not findings:
            return
        for exporter in self._inline:
            self._guard(exporter.write, points, findings)
        if self._thread is None:
            return
        if len(self._queue) >= self._max:
            self.dropped += len(points)
            return
        self._queue.append((points, findings))
        self._wake.set()

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until the exporter thread has handed every queued batch on."""
        if self._thread is None or not self._thread.is_alive():
            return True
        done = threading.Event()
        self._queue.append(done)
        self._wake.set()
        return done.wait(timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Hand every queued batch on, stop the thread, close the exporters. Idempotent; never raises."""
        if self._stop:
            return
        self._stop = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        for exporter in self.exporters:
            self._guard(exporter.close)

    # -- export thread -----------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            self._wake.wait(0.5)
            self._wake.clear()
            self._drain()
            if self._stop:
                self._drain()
                return

    def _drain(self) -> None:
        while self._queue:
            item = self._queue.popleft()
            if isinstance(item, threading.Event):
                item.set()
                continue
            for exporter in self._queued:
                self._guard(exporter.write, *item)

    def _guard(self, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:  # noqa: BLE001 - never crash the run for an exporter
            self._count(exc, f"exporting ({type(getattr(fn, '__self__', fn)).__name__})")

    def _count(self, exc: Exception, what: str) -> None:
        self.errors += 1
        if self.errors == 1:
            log.warning("stethoscope failed %s: %s; the run goes on (further failures are only counted)",
                        what, exc, exc_info=exc)


def exporters(specs: Any, prometheus_port: int | None) -> list[Any]:
    """The exporter objects for `specs` (names or objects) and Prometheus on `prometheus_port`; a misspelt
    name or a missing package raises here, before the Monitor creates anything."""
    specs = [specs] if isinstance(specs, str) or not isinstance(specs, (list, tuple)) else list(specs)
    out = [make(s) for s in specs if s is not None]
    if prometheus_port is not None and not any(type(e).__name__ == "Prometheus" for e in out):
        from stethoscope.exporters.prometheus import Prometheus

        out.append(Prometheus(port=prometheus_port))
    return out


def start_exports(exporters: Sequence[Any], context: ExportContext) -> LiveExport:
    """Open the exporters for the Monitor; one that fails to open (a port in use, an unreachable
    server) is logged and left out, the run goes on without it."""
    opened = []
    for exporter in exporters:
        if type(exporter).__name__ == "Prometheus" and exporter.port and context.world_size > 1:
            exporter.port += context.rank  # rank r serves P + r
        try:
            exporter.open(context)
        except ImportError:  # a missing package: one line naming the extra, nothing left running
            for done in opened:
                done.close()
            raise
        except Exception as exc:  # noqa: BLE001 - the run goes on without this exporter
            log.warning("stethoscope: could not start the %s exporter (%s); the run goes on without it",
                        type(exporter).__name__, exc)
            continue
        opened.append(exporter)
    return LiveExport(opened)


def attach_exports(recorder: Any, chosen: Sequence[Any], run_dir: Any, rank: int, world_size: int,
                   config: Any) -> LiveExport:
    """Start the exporters for a Monitor's recorder (the last stage of its observer chain). The Prometheus
    URL goes into the run's metadata (`prometheus_url`)."""
    from pathlib import Path

    context = ExportContext(run=Path(run_dir).name, run_dir=Path(run_dir), rank=rank, world_size=world_size,
                            config=config if isinstance(config, dict) else {})
    live = start_exports(chosen, context)
    if live.prometheus_url:
        recorder.call("set_meta", {"prometheus_url": live.prometheus_url})
        # said once, where a person starting the run looks (a scrape config needs it), not only in a log
        print(f"stethoscope: Prometheus metrics of rank {rank} at {live.prometheus_url}", file=sys.stderr)
    return live
