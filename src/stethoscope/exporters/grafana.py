"""A Grafana dashboard (JSON, to import) over the gauges every rank serves: one panel per vital sign,
one line per run and rank, `run` and `rank` pickers, findings as they are raised."""

from __future__ import annotations

from typing import Any

from stethoscope import records as R
from stethoscope.exporters.prometheus import FINDINGS, STEP, metric_name

# (title, unit, [(series, legend suffix)]) in the order a person reads a run.
PANELS: list[tuple[str, str, list[tuple[str, str]]]] = [
    ("Loss", "none", [(R.LOSS, "train"), (R.EVAL_LOSS, "eval")]),
    ("Gradient norm (pre-clip)", "none", [(R.GRAD_NORM, "")]),
    ("Learning rate", "none", [(R.LR, "")]),
    ("Tokens/s", "none", [(R.TOKENS_PER_S, "")]),
    ("MFU", "percentunit", [(R.MFU, "")]),
    ("Step time", "s", [(R.STEP_TIME, "step"), (R.DATA_WAIT, "data wait")]),
    ("Memory", "bytes", [(R.RSS, "host RSS"), (R.CUDA_RESERVED, "device reserved"),
                             (R.CUDA_PEAK, "device peak")]),
    ("Loss scale (fp16)", "none", [(R.LOSS_SCALE, "")]),
    ("Update/weight ratio", "none", [(R.UPDATE_RATIO, "")]),
    ("GPU utilization (NVML)", "percentunit", [(R.GPU_UTIL, "SM gpu{{gpu}}"), (R.GPU_MEM_UTIL, "memory gpu{{gpu}}")]),
    ("GPU temperature", "celsius", [(R.GPU_TEMP, "gpu{{gpu}}")]),
    ("GPU power", "watt", [(R.GPU_POWER, "gpu{{gpu}}"), (R.GPU_POWER_LIMIT, "limit gpu{{gpu}}")]),
    ("GPU throttling (1 = clocks held down)", "none", [(R.GPU_THROTTLE_THERMAL, "thermal gpu{{gpu}}"),
                                                      (R.GPU_THROTTLE_POWER, "power cap gpu{{gpu}}")]),
]
SELECT = '{run=~"$run", rank=~"$rank"}'


def dashboard(title: str = "stethoscope", datasource_uid: str = "${datasource}") -> dict[str, Any]:
    """The dashboard's JSON model (Grafana 9+; import it, or provision it from a file)."""
    ds = {"type": "prometheus", "uid": datasource_uid}
    panels = []
    for i, (name, unit, series) in enumerate(PANELS):
        targets = [{"datasource": ds, "refId": chr(65 + j), "expr": metric_name(s) + SELECT,
                    "legendFormat": "{{run}} r{{rank}}" + (f" {suffix}" if suffix else "")}
                   for j, (s, suffix) in enumerate(series)]
        panels.append(_panel(i + 1, name, unit, targets, ds, x=12 * (i % 2), y=8 * (i // 2)))
    findings = [{"datasource": ds, "refId": "A", "legendFormat": "{{run}} r{{rank}} {{type}} ({{severity}})",
                 "expr": f"increase({FINDINGS}_total{SELECT}[$__rate_interval])"}]
    panels.append(_panel(len(panels) + 1, "Findings raised", "none", findings, ds, x=12 * (len(panels) % 2),
                         y=8 * (len(panels) // 2), bars=True))
    steps = [{"datasource": ds, "refId": "A", "expr": STEP + SELECT, "legendFormat": "{{run}} r{{rank}}"}]
    panels.append(_panel(len(panels) + 1, "Step", "none", steps, ds, x=12 * (len(panels) % 2),
                         y=8 * (len(panels) // 2)))
    return {
        "title": title, "uid": "stethoscope", "tags": ["stethoscope", "training"], "timezone": "browser",
        "schemaVersion": 39, "version": 1, "editable": True, "refresh": "10s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"},
            _variable("run", f"label_values({STEP}, run)", ds),
            _variable("rank", f'label_values({STEP}{{run=~"$run"}}, rank)', ds),
        ]},
        "annotations": {"list": [{
            "name": "stethoscope findings", "datasource": ds, "enable": True, "iconColor": "red",
            "expr": f"changes({FINDINGS}_total{{run=~\"$run\", severity=~\"error|critical\"}}[1m]) > 0",
            "titleFormat": "{{type}}", "textFormat": "{{run}} rank {{rank}}: {{severity}}",
        }]},
        "panels": panels,
    }


def _panel(pid: int, title: str, unit: str, targets: list[dict[str, Any]], ds: dict[str, str], x: int, y: int,
           bars: bool = False) -> dict[str, Any]:
    custom = {"drawStyle": "bars" if bars else "line", "lineWidth": 1, "showPoints": "never", "spanNulls": True}
    return {"id": pid, "type": "timeseries", "title": title, "datasource": ds, "targets": targets,
            "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
            "fieldConfig": {"defaults": {"unit": unit, "custom": custom}, "overrides": []},
            "options": {"legend": {"displayMode": "list", "placement": "bottom"}, "tooltip": {"mode": "multi"}}}


def _variable(name: str, query: str, ds: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "type": "query", "datasource": ds, "query": {"query": query, "refId": name},
            "definition": query, "refresh": 2, "multi": True, "includeAll": True, "current": {}, "sort": 1}
