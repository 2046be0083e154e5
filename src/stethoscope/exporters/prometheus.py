"""Prometheus: every rank serves `/metrics` with its vital signs and finding counters.

Each series becomes a gauge named `stethoscope_<series>` in Prometheus' base units (`train/loss` →
`stethoscope_train_loss`, `memory/rss_gib` → `stethoscope_memory_rss_bytes`, `perf/step_time_s` →
`…_step_time_seconds`, `system/cpu_pct` → `…_cpu_ratio`, `perf/tokens_per_s` → `…_tokens_per_second`,
`gpu/temp_c` → `…_gpu_temp_celsius`) holding its latest value, labelled by `run` and `rank`; a series of one
device (`gpu/power_w/gpu1`, `memory/cuda_reserved_gib/cuda1`) is the same metric with a `gpu` label, as
NVIDIA's DCGM exporter labels its gauges. Cumulative device counts (ECC errors, PCIe replays) are counters.
`stethoscope_step` and `stethoscope_last_step_timestamp_seconds` say how far the rank got and when;
`stethoscope_findings_total{type, severity}` counts findings. The server binds 127.0.0.1 by default (pass
addr="0.0.0.0" for a Prometheus on another host) and uses its own registry.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from stethoscope.exporters.base import ExportContext, Point
from stethoscope.extras import require
from stethoscope.records import Finding, unit_of

PREFIX = "stethoscope_"
STEP = PREFIX + "step"
LAST_STEP_TIME = PREFIX + "last_step_timestamp_seconds"
FINDINGS = PREFIX + "findings"  # exposed as stethoscope_findings_total (a counter)
MAX_SERIES = 1000  # per-layer grad norms of a huge model stay out beyond this many gauges


# A series' unit suffix -> (Prometheus base-unit suffix, factor to base units).
_BASE_UNITS = (("_per_s", "_per_second", 1.0), ("_gib", "_bytes", float(1 << 30)), ("_mib", "_bytes", float(1 << 20)),
               ("_ms", "_seconds", 1e-3), ("_s", "_seconds", 1.0), ("_pct", "_ratio", 1e-2), ("_c", "_celsius", 1.0),
               ("_w", "_watts", 1.0), ("_hz", "_hertz", 1.0), ("_mfu", "_mfu_ratio", 1.0))
_DEVICE = re.compile(r"/(?:gpu|cuda)(\d+)$")


def exported(series: str) -> tuple[str, float, str | None]:
    """(Prometheus name in base units, factor to apply to the value, device index or None) of a series."""
    device = None
    m = _DEVICE.search(series)
    if m:
        device, series = m.group(1), series[: m.start()]
    name = re.sub(r"_+", "_", re.sub(r"[^a-zA-Z0-9_]", "_", series)).strip("_")
    for suffix, base, factor in _BASE_UNITS:
        if name.endswith(suffix):
            return PREFIX + name[: -len(suffix)] + base, factor, device
    return PREFIX + name, 1.0, device


def metric_name(series: str) -> str:
    """The Prometheus name of a stethoscope series: `train/loss` → `stethoscope_train_loss`,
    `memory/rss_gib` → `stethoscope_memory_rss_bytes` (values converted to base units)."""
    return exported(series)[0]


class Prometheus:
    """Serves `/metrics` on `port` (0: any free port) at `addr`; `url` says where once open. In a run of
    several ranks, rank r of a Monitor given `prometheus_port=P` serves P + r (P = 0: each a free port)."""

    inline = True  # setting a few numbers under a lock: cheap enough for the writer thread

    def __init__(self, port: int = 0, addr: str = "127.0.0.1") -> None:
        require("prometheus_client", "prometheus", "the Prometheus exporter")  # fails early: before a Monitor starts
        self.port, self.addr = port, addr
        self.url: str | None = None
        self._labels = ("", "0")
        self._values: dict[str, float] = {}
        self._findings: dict[tuple[str, str], int] = {}
        self._step: float | None = None
        self._step_time: float | None = None
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: Any = None
        self.registry: Any = None

    def open(self, context: ExportContext) -> None:
        client = require("prometheus_client", "prometheus", "the Prometheus exporter")
        self._labels = (context.run, str(context.rank))
        self.registry = client.CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        self._server, self._thread = client.start_http_server(self.port, addr=self.addr, registry=self.registry)
        self.port = self._server.server_address[1]
        self.url = f"http://{self.addr}:{self.port}/metrics"

    def write(self, points: Sequence[Point], findings: Sequence[Finding]) -> None:
        with self._lock:
            values = self._values
            for name, step, value, t in points:
                if name in values or len(values) < MAX_SERIES:
                    values[name] = value
                if self._step is None or step >= self._step:
                    self._step, self._step_time = step, t if t is not None else time.time()
            for f in findings:
                key = (f.type, f.severity)
                self._findings[key] = self._findings.get(key, 0) + 1

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
            self._thread.join(5)

    # -- prometheus_client's Collector protocol --------------------------------------------------
    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        labels = ["run", "rank"]
        with self._lock:
            values, findings = dict(self._values), dict(self._findings)
            step, step_time = self._step, self._step_time
        if step is not None:
            yield _gauge(GaugeMetricFamily, STEP, "Last step this rank recorded.", labels, self._labels, step)
            yield _gauge(GaugeMetricFamily, LAST_STEP_TIME, "Unix time of the last recorded step.", labels,
                         self._labels, step_time)
        families: dict[str, list[tuple[str | None, float, str]]] = {}
        for series, value in sorted(values.items()):
            name, factor, device = exported(series)
            if name in (STEP, LAST_STEP_TIME):
                continue
            families.setdefault(name, []).append((device, value * factor, series))
        for name, rows in families.items():
            yield self._family(name, rows, labels)
        counter = CounterMetricFamily(FINDINGS, "Findings raised by stethoscope's detectors.",
                                      labels=labels + ["type", "severity"])
        for (kind, severity), n in sorted(findings.items()):
            counter.add_metric([*self._labels, kind, severity], n)
        yield counter

    def _family(self, name: str, rows: list[tuple[str | None, float, str]], labels: list[str]) -> Any:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        per_device = [r for r in rows if r[0] is not None]
        rows = per_device or rows[:1]  # device 0's plain-named copy is not a second time series
        series = rows[0][2]
        unit = unit_of(series)
        doc = f"stethoscope series {_DEVICE.sub('', series)}" + (f" (recorded in {unit})" if unit else "")
        counter = name.endswith("_total")
        family = (CounterMetricFamily(name[: -len("_total")], doc, labels=labels + (["gpu"] if per_device else []))
                  if counter else GaugeMetricFamily(name, doc, labels=labels + (["gpu"] if per_device else [])))
        for device, value, _ in rows:
            family.add_metric([*self._labels, *([device] if device is not None else [])], value)
        return family


def _gauge(cls: Any, name: str, doc: str, labels: list[str], values: tuple[str, str], value: float) -> Any:
    g = cls(name, doc, labels=labels)
    g.add_metric(list(values), value)
    return g
