"""The page around a report: styles, the script that draws the figures, and the page skeleton.

Nothing here reaches the network: plotly.js is passed in and inlined by `page()`; figures travel as
JSON in a `<script type="application/json">` block whose `<`, `>` and `&` are escaped.
"""

from __future__ import annotations

import html

SEVERITY_COLORS = {"info": "#4a7bd0", "warning": "#d98e04", "error": "#d64527", "critical": "#9c0f5f"}

CSS = """
:root { --fg:#1d2433; --muted:#5d6b82; --line:#e3e7ee; --bg:#f5f7fa; --card:#fff; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 -apple-system,BlinkMacSystemFont,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;
       color:var(--fg); background:var(--bg); }
main { max-width:1400px; margin:0 auto; padding:20px 24px 40px; }
h1 { font-size:22px; margin:0 0 4px; }
h2 { font-size:16px; margin:28px 0 10px; }
.st-head { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:16px 20px; }
.st-facts { display:flex; flex-wrap:wrap; gap:8px 28px; color:var(--muted); margin-top:6px; }
.st-facts b { color:var(--fg); font-weight:600; }
.st-headline { margin-top:10px; font-size:15px; }
.st-badge { display:inline-block; padding:1px 8px; border-radius:10px; color:#fff; font-size:12px;
            font-weight:600; text-transform:uppercase; letter-spacing:.02em; white-space:nowrap; }
.st-ok { background:#2e8b57; }
.st-grid { display:grid; grid-template-columns:1fr 1fr; gap:14px; }
.st-chart { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:4px; min-height:330px; }
.st-wide { grid-column:1 / -1; }
table { border-collapse:collapse; width:100%; background:var(--card); border:1px solid var(--line); }
th, td { text-align:left; vertical-align:top; padding:7px 10px; border-bottom:1px solid var(--line); }
th { background:#eef1f6; font-weight:600; font-size:13px; }
td ol { margin:0; padding-left:18px; }
td.st-ev { font-family:ui-monospace,SFMono-Regular,Menlo,monospace; font-size:12px; color:var(--muted);
           min-width:220px; max-width:320px; word-break:break-word; }
td code { white-space:nowrap; }
td code, .st-meta td { font-family:ui-monospace,SFMono-Regular,Menlo,monospace; font-size:12px; word-break:break-word; }
.st-meta th { width:28%; }
.st-group td { background:#f8f9fb; font-weight:600; font-family:inherit; }
tr.st-same { display:none; }
body.st-all tr.st-same { display:table-row; }
.st-diff td { background:#fff8e6; }
.st-none { color:var(--muted); padding:12px; background:var(--card); border:1px solid var(--line); border-radius:8px; }
footer { color:var(--muted); font-size:12px; margin-top:30px; }
@media (max-width: 900px) { .st-grid { grid-template-columns:1fr; } }
"""

SCRIPT = """
(function () {
  var figures = JSON.parse(document.getElementById('st-figures').textContent);
  var config = {responsive: true, displaylogo: false, modeBarButtonsToRemove: ['select2d', 'lasso2d']};
  figures.forEach(function (f) { Plotly.newPlot(f.id, f.data, f.layout, config); });
  var all = document.getElementById('st-show-all');
  if (all) { all.addEventListener('change', function () { document.body.classList.toggle('st-all', all.checked); }); }
})();
"""


def json_for_script(text: str) -> str:
    """Make JSON text safe inside a <script> element (no `</script>`, no HTML comment openers)."""
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def badge(severity: str) -> str:
    color = SEVERITY_COLORS.get(severity, "#777")
    return f'<span class="st-badge" style="background:{color}">{html.escape(severity)}</span>'


def page(title: str, body: str, figures_json: str, plotly_js: str) -> str:
    """The whole HTML document: one inlined copy of plotly.js for every chart on the page."""
    safe_js = plotly_js.replace("</script", "<\\/script")
    return "".join((
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
        f"<title>{html.escape(title)}</title>\n<style>{CSS}</style>\n",
        f"<script>{safe_js}</script>\n</head>\n<body>\n<main>\n{body}\n",
        "<footer>Written by stethoscope. Self-contained: no network access needed.</footer>\n</main>\n",
        f"<script type=\"application/json\" id=\"st-figures\">{json_for_script(figures_json)}</script>\n",
        f"<script>{SCRIPT}</script>\n</body>\n</html>\n",
    ))
