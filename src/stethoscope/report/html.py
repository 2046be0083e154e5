"""`stethoscope report` and `stethoscope compare`: one self-contained HTML file per call.

The charts are plotly figures drawn by one inlined copy of plotly.js (no CDN, no network). Long
series are downsampled per bucket to their minimum and maximum, so a spike survives and a 1M-step
run stays a few MB; non-finite values are shown as markers at their steps. Every finding with a step
is drawn on the charts it concerns as a vertical line in its severity's colour, with a marker whose
hover text is the finding's message. All text from logs is HTML-escaped.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stethoscope import records as r
from stethoscope.report.facts import (  # flatten, logged_steps, findings_text: also read here by the CLI and tests
    clip, facts, findings_text, flatten, logged_steps, meta_table,  # noqa: F401
)
from stethoscope.report.template import SEVERITY_COLORS, badge, page
from stethoscope.findings import catalogue
from stethoscope.records import Finding, json_safe, severity_rank

Series = tuple[list[int], list[float]]
MAX_POINTS = 4000  # per plotted series; two points (min, max) per bucket
PALETTE = ("#2f6fdf", "#e0701b", "#2e9d5b", "#b5389b", "#7a5cd6", "#c9a227", "#1f9fb5", "#d1495b",
           "#5f7a1f", "#8c564b")


@dataclass(slots=True)
class ReportInput:
    """Everything a report shows about one run.

    `series` maps metric names (`records` vocabulary) to (steps, values); `meta` holds run metadata
    (config, git, host, versions, status, start/end times…); `ranks` optionally holds per-rank series.
    """

    title: str
    series: dict[str, Series]
    findings: list[Finding]
    meta: dict[str, object]
    ranks: dict[int, dict[str, Series]] | None = None


@dataclass(frozen=True, slots=True)
class Chart:
    """One chart of the report (and of the dashboard, which draws its own set of them)."""

    id: str  # findings name the charts they are drawn on (findings/catalogue)
    title: str
    metrics: tuple[str, ...]
    log_y: bool = False
    wide: bool = False


CHARTS = (
    Chart("loss", "Loss", (r.LOSS, r.EVAL_LOSS), wide=True),
    Chart("grad_norm", "Gradient norm (log)", (r.GRAD_NORM,), log_y=True),
    Chart("lr", "Learning rate", (r.LR,)),
    Chart("throughput", "Throughput", (r.TOKENS_PER_S, r.SAMPLES_PER_S)),
    Chart("step_time", "Step time (s)", (r.STEP_TIME, r.DATA_WAIT)),
    Chart("memory", "Memory (GiB)", (r.CUDA_ALLOCATED, r.CUDA_RESERVED, r.CUDA_PEAK, r.CUDA_TOTAL, r.RSS)),
    Chart("loss_scale", "Loss scale (log)", (r.LOSS_SCALE,), log_y=True),
    Chart("gpu", "GPU utilization (NVML, 0–1)", (r.GPU_UTIL, r.GPU_MEM_UTIL)),
    Chart("gpu_temp", "GPU temperature (°C) and power (W)", (r.GPU_TEMP, r.GPU_POWER)),
)


# -- downsampling -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Downsampled:
    steps: list[int]
    values: list[float]
    nonfinite_steps: list[int]


def downsample(steps: Sequence[int], values: Sequence[float], max_points: int = MAX_POINTS) -> Downsampled:
    """Thin a series to at most `max_points` finite points, keeping each bucket's min and max.

    Non-finite values are left out of the line and returned (thinned to `max_points`) as steps.
    """
    x = np.asarray(steps, dtype=np.int64)
    y = np.asarray(values, dtype=np.float64)
    bad = ~np.isfinite(y)
    nonfinite = x[bad]
    if len(nonfinite) > max_points:
        nonfinite = nonfinite[np.linspace(0, len(nonfinite) - 1, max_points).astype(np.int64)]
    keep = _min_max_indices(y, bad, max(2, max_points)) if len(y) > max_points else np.flatnonzero(~bad)
    return Downsampled(x[keep].tolist(), y[keep].tolist(), nonfinite.tolist())


def _min_max_indices(y: np.ndarray, bad: np.ndarray, max_points: int) -> np.ndarray:
    buckets = max_points // 2
    size = math.ceil(len(y) / buckets)
    pad = buckets * size - len(y)
    low = np.concatenate([np.where(bad, np.inf, y), np.full(pad, np.inf)]).reshape(buckets, size)
    high = np.concatenate([np.where(bad, -np.inf, y), np.full(pad, -np.inf)]).reshape(buckets, size)
    start = np.arange(buckets) * size
    i_min, i_max = start + low.argmin(axis=1), start + high.argmax(axis=1)
    has_value = np.isfinite(low.min(axis=1))
    return np.unique(np.concatenate([i_min[has_value], i_max[has_value]]))


# -- figures ------------------------------------------------------------------------------------


def _round(values: Iterable[float]) -> list[float]:
    return [float(f"{v:.6g}") for v in values]


def _line(name: str, series: Series, color: str, max_points: int, dash: str = "solid") -> list[dict[str, Any]]:
    # Plotly reads names and hover text as HTML-like markup: escape, and neutralise %{…} templates.
    label = html.escape(name).replace("%", "&#37;")
    d = downsample(series[0], series[1], max_points)
    traces: list[dict[str, Any]] = [{
        "type": "scatter", "mode": "lines+markers" if len(d.steps) < 60 else "lines", "name": label,
        "legendgroup": label, "x": d.steps, "y": _round(d.values),
        "line": {"color": color, "width": 1.6, "dash": dash}, "marker": {"size": 4},
        "hovertemplate": f"{label}<br>step %{{x}}: %{{y:.4g}}<extra></extra>",
    }]
    if d.nonfinite_steps:
        traces.append({
            "type": "scatter", "mode": "markers", "name": f"{label} NaN/Inf", "legendgroup": label,
            "showlegend": False, "yaxis": "y2", "x": d.nonfinite_steps, "y": [0.04] * len(d.nonfinite_steps),
            "marker": {"symbol": "x", "size": 9, "color": "#c0122c"},
            "hovertemplate": f"{label} is NaN/Inf at step %{{x}}<extra></extra>",
        })
    return traces


def _hover(finding: Finding) -> str:
    step = f"step {finding.step}" + (f"–{finding.end_step}" if finding.end_step is not None else "")
    return f"<b>{html.escape(finding.severity)}</b> · {html.escape(finding.type)} · {step}<br>" + \
        html.escape(clip(finding.message, 160))


def _finding_marks(findings: Sequence[Finding]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    traces, shapes = [], []
    for severity in reversed(r.SEVERITIES):
        marked = [f for f in findings if f.severity == severity]
        if not marked:
            continue
        color = SEVERITY_COLORS[severity]
        traces.append({"type": "scatter", "mode": "markers", "yaxis": "y2", "showlegend": False,
                       "name": f"{severity} finding", "x": [f.step for f in marked], "y": [0.97] * len(marked),
                       "marker": {"symbol": "triangle-down", "size": 12, "color": color},
                       "hovertext": [_hover(f) for f in marked], "hoverinfo": "text"})
        for f in marked:
            shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": f.step, "x1": f.step, "y0": 0,
                           "y1": 1, "line": {"color": color, "width": 1.5, "dash": "dot"}})
            if f.end_step is not None and f.end_step != f.step:
                shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": f.step, "x1": f.end_step,
                               "y0": 0, "y1": 1, "fillcolor": color, "opacity": 0.08, "line": {"width": 0}})
    return traces, shapes


def _layout(title: str, log_y: bool, shapes: list[dict[str, Any]], height: int = 330) -> dict[str, Any]:
    return {
        "title": {"text": html.escape(title), "x": 0.01, "y": 0.97, "yanchor": "top", "font": {"size": 14}},
        "height": height,
        "margin": {"l": 60, "r": 20, "t": 58, "b": 40}, "hovermode": "closest", "shapes": shapes,
        "xaxis": {"title": {"text": "step"}, "zeroline": False},
        "yaxis": {"type": "log" if log_y else "linear", "zeroline": False, "exponentformat": "power"},
        "yaxis2": {"overlaying": "y", "range": [0, 1], "visible": False, "fixedrange": True},
        # Legend just above the plot area, right-aligned; the title sits left and the tool bar above.
        "legend": {"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 1, "xanchor": "right",
                   "font": {"size": 11}},
        "paper_bgcolor": "#ffffff", "plot_bgcolor": "#fbfcfe",
    }


def _figure(fig_id: str, title: str, traces: list[dict[str, Any]], log_y: bool,
            findings: Sequence[Finding] = ()) -> dict[str, Any]:
    marks, shapes = _finding_marks(findings)
    layout = _layout(title, log_y, shapes)
    flat = {v for t in traces if "yaxis" not in t for v in t["y"] if math.isfinite(v)}
    if len(flat) == 1 and not log_y and 0 not in flat:  # plotly draws a constant line at "0" on a -1..1 axis:
        (v,) = flat                                      # a constant LR of 0.003 read as an LR of 0
        layout["yaxis"]["range"] = [v - abs(v) / 2, v + abs(v) / 2]
    return {"id": fig_id, "data": traces + marks, "layout": layout}


def _charts_for(series: dict[str, Series]) -> list[Chart]:
    charts = [c for c in CHARTS if any(m in series for m in c.metrics)]
    charted = {m for c in CHARTS for m in c.metrics}
    extra_memory = tuple(m for m in series if m.startswith("memory/") and m not in charted)
    if extra_memory:
        memory = next((c for c in charts if c.id == "memory"), None)
        merged = Chart("memory", "Memory (GiB)", (memory.metrics if memory else ()) + extra_memory)
        charts = [c for c in charts if c.id != "memory"] + [merged]
        charted |= set(extra_memory)
    rest = sorted(name for name in series if name not in charted)
    others = [Chart(f"other-{i}", name, (name,)) for i, name in enumerate(rest)]
    return charts + others


def _findings_on(chart: Chart, findings: Sequence[Finding], chart_ids: list[str]) -> list[Finding]:
    first = chart_ids[0] if chart_ids else ""
    picked = []
    for f in findings:
        if f.step is None:
            continue
        wanted = [c for c in catalogue.charts(f.type) if c in chart_ids] or [first]
        if catalogue.every_chart(f.type) or chart.id in wanted:
            picked.append(f)
    return picked


def _run_figures(run: ReportInput) -> list[tuple[Chart, dict[str, Any]]]:
    charts = _charts_for(run.series)
    ids = [c.id for c in charts]
    out = []
    for chart in charts:
        traces = [t for i, m in enumerate(x for x in chart.metrics if x in run.series)
                  for t in _line(m, run.series[m], PALETTE[i % len(PALETTE)], MAX_POINTS)]
        out.append((chart, _figure(f"st-{chart.id}", chart.title, traces, chart.log_y,
                                   _findings_on(chart, run.findings, ids))))
    return out


def _finite_mean(values: Sequence[float]) -> float:
    y = np.asarray(values, dtype=np.float64)
    y = y[np.isfinite(y)]
    return float(y.mean()) if len(y) else 0.0


def _rank_figures(ranks: dict[int, dict[str, Series]], limit: int = 32) -> list[dict[str, Any]]:
    names = sorted({m for per in ranks.values() for m in per})
    figures = []
    for i, name in enumerate(names):
        have = {k: per[name] for k, per in ranks.items() if name in per}
        shown = sorted(have, key=lambda k: -_finite_mean(have[k][1]))[:limit]
        traces = [t for j, k in enumerate(sorted(shown))
                  for t in _line(f"rank {k}", have[k], PALETTE[j % len(PALETTE)], MAX_POINTS // 4)]
        title = f"{name} per rank" + (f" (highest {limit} of {len(have)} by mean)" if len(have) > limit else "")
        figure = _figure(f"st-rank-{i}", title, traces, name in (r.GRAD_NORM, r.LOSS_SCALE))
        if len(shown) > 4:  # many ranks: a legend column on the right instead of rows over the title
            figure["layout"]["legend"] = {"orientation": "v", "x": 1.01, "y": 1, "font": {"size": 11}}
            figure["layout"]["margin"]["r"] = 80
        figures.append(figure)
    return figures


# -- tables and header --------------------------------------------------------------------------


def ranked(findings: Iterable[Finding]) -> list[Finding]:
    """Findings ordered most severe first, then by step (no step last)."""
    return sorted(findings, key=lambda f: (-severity_rank(f.severity), f.step is None, f.step or 0))


_EVIDENCE_ITEMS = 8  # list items shown per evidence value (16 batch ids made a row a screen tall)


def _evidence(evidence: dict[str, Any]) -> str:
    items = []
    for key, value in json_safe(evidence).items():
        if isinstance(value, float):
            text = f"{value:.4g}"  # evidence is for people: four significant digits
        elif isinstance(value, list) and len(value) > _EVIDENCE_ITEMS:  # as the terminal shows it; --json has all
            text = json.dumps(value[:_EVIDENCE_ITEMS], ensure_ascii=False)[:-1] + f", … {len(value)} in all]"
        else:
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        items.append(f"<div><b>{html.escape(str(key))}</b>: {html.escape(clip(text, 240))}</div>")
    return "".join(items)


def _list(items: Sequence[str]) -> str:
    items = [x for x in items if x]  # a fix "": a cause with no fix of its own
    return "<ol>" + "".join(f"<li>{html.escape(x)}</li>" for x in items) + "</ol>" if items else ""


def _findings_table(findings: Sequence[Finding]) -> str:
    if not findings:
        return '<div class="st-none">No findings: nothing wrong was detected in this run.</div>'
    rows = []
    for f in ranked(findings):
        step = "–" if f.step is None else str(f.step) + (f"–{f.end_step}" if f.end_step is not None else "")
        rows.append(f"<tr><td>{badge(f.severity)}</td><td><code>{html.escape(f.type)}</code></td>"
                    f"<td>{html.escape(step)}</td><td>{html.escape(f.message)}</td>"
                    f'<td class="st-ev">{_evidence(f.evidence)}</td><td>{_list(f.causes)}</td>'
                    f"<td>{_list(f.fixes)}</td></tr>")
    head = "".join(f"<th>{h}</th>" for h in ("Severity", "Type", "Step", "Finding", "Evidence", "Probable causes",
                                               "Fixes to try"))
    return f'<table class="st-findings"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def lead(findings: Sequence[Finding]) -> Finding:
    """The finding a page opens with: the most severe; below warning, the verdict (`healthy`) before a note."""
    top = ranked(findings)[0]
    if severity_rank(top.severity) < severity_rank("warning"):
        return next((f for f in findings if f.type == "healthy"), top)
    return top


def headline(findings: Sequence[Finding], badge: bool = False) -> str:
    """One sentence for the top of the page: the most severe finding, or that nothing was found. Beside a
    severity badge (`badge`) it starts with the finding's type, as `diagnose` does, not the severity again."""
    if not findings:
        return "No problems found."
    top = lead(findings)
    where = f" at step {top.step}" if top.step is not None else ""
    return f"{top.type if badge else top.severity.capitalize()}{where}: {top.message}"


def _header(run: ReportInput) -> str:
    shown = "".join(f"<span>{html.escape(k)}: <b>{html.escape(v)}</b></span>" for k, v in facts(run).items())
    top = lead(run.findings) if run.findings else None
    mark = badge(top.severity) if top else '<span class="st-badge st-ok">ok</span>'
    return (f'<section class="st-head"><h1>{html.escape(run.title)}</h1><div class="st-facts">{shown}</div>'
            f'<div class="st-headline">{mark} {html.escape(headline(run.findings, badge=top is not None))}</div></section>')


def _chart_grid(charts: Sequence[tuple[str, bool]]) -> str:
    cells = "".join(f'<div id="{cid}" class="st-chart{" st-wide" if wide else ""}"></div>' for cid, wide in charts)
    return f'<div class="st-grid">{cells}</div>'


def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs  # lazy: plotly is only needed when a report is written

    return get_plotlyjs()


def _document(title: str, body: str, figures: list[dict[str, Any]]) -> str:
    return page(title, body, json.dumps(figures, allow_nan=False, separators=(",", ":")), _plotly_js())


def render_report(run: ReportInput) -> str:
    """One self-contained HTML page for one run: header, findings, charts with findings marked, metadata."""
    pairs = _run_figures(run)
    figures = [fig for _, fig in pairs]
    body = [_header(run), "<h2>Findings</h2>", _findings_table(run.findings), "<h2>Curves</h2>"]
    body.append(_chart_grid([(fig["id"], chart.wide) for chart, fig in pairs]) if pairs
                else '<div class="st-none">No series recorded.</div>')
    if run.ranks:
        rank_figs = _rank_figures(run.ranks)
        figures += rank_figs
        body += ["<h2>Per rank</h2>", _chart_grid([(f["id"], False) for f in rank_figs])]
    body += ["<h2>Run metadata</h2>", meta_table(run.meta)]
    return _document(f"{run.title} — stethoscope report", "\n".join(body), figures)


# -- compare ------------------------------------------------------------------------------------


def _diff_table(runs: Sequence[ReportInput]) -> str:
    flats = [flatten(run.meta) for run in runs]
    keys = sorted({k for flat in flats for k in flat}, key=lambda k: (not k.startswith("config."), k))
    if not keys:
        return '<div class="st-none">No run metadata to compare.</div>'
    head = "<th>key</th>" + "".join(f"<th>{html.escape(run.title)}</th>" for run in runs)
    rows, differing = [], 0
    for key in keys:
        values = [flat.get(key) for flat in flats]
        same = len(set(values)) == 1
        differing += not same
        cells = "".join(f"<td>{'–' if v is None else html.escape(clip(v, 300))}</td>" for v in values)
        rows.append(f'<tr class="{"st-same" if same else "st-diff"}"><th>{html.escape(key)}</th>{cells}</tr>')
    toggle = (f'<p>{differing} of {len(keys)} keys differ. <label><input type="checkbox" id="st-show-all"> '
              "show all keys</label></p>")
    return f'{toggle}<table class="st-meta st-compare"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _summary_table(runs: Sequence[ReportInput]) -> str:
    rows = []
    for run in runs:
        fact = facts(run)
        rows.append(f"<tr><th>{html.escape(run.title)}</th><td>{html.escape(fact['status'])}</td>"
                    f"<td>{html.escape(fact['last step'])}</td><td>{html.escape(fact['steps logged'])}</td>"
                    f"<td>{html.escape(fact['duration'])}</td>"
                    f"<td>{html.escape(headline(run.findings))}</td></tr>")
    head = "".join(f"<th>{h}</th>"
                   for h in ("run", "status", "last step", "steps logged", "duration", "headline"))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def render_compare(runs: list[ReportInput]) -> str:
    """One self-contained HTML page comparing runs: summary, config diff, overlaid curves per metric."""
    order = {m: i for i, m in enumerate(m for c in CHARTS for m in c.metrics)}
    metrics = sorted({m for run in runs for m in run.series}, key=lambda m: (order.get(m, len(order)), m))
    per_run = max(200, MAX_POINTS // max(1, len(runs)))
    figures = []
    for i, metric in enumerate(metrics):
        traces = [t for j, run in enumerate(runs) if metric in run.series
                  for t in _line(run.title, run.series[metric], PALETTE[j % len(PALETTE)], per_run)]
        figures.append(_figure(f"st-cmp-{i}", metric, traces, metric in (r.GRAD_NORM, r.LOSS_SCALE)))
    title = " vs ".join(run.title for run in runs) or "no runs"
    body = [f'<section class="st-head"><h1>{html.escape(clip(title, 200))}</h1>'
            f'<div class="st-facts"><span>runs: <b>{len(runs)}</b></span></div></section>',
            "<h2>Runs</h2>", _summary_table(runs), "<h2>Configuration differences</h2>", _diff_table(runs),
            "<h2>Curves</h2>", _chart_grid([(f["id"], False) for f in figures])]
    return _document(f"{clip(title, 120)} — stethoscope compare", "\n".join(body), figures)
