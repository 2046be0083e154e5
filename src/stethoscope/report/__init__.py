"""The self-contained HTML report of a diagnosis (plotly inlined) and its page template, shared with the
dashboard's styles: `html.render_report`, `html.render_compare`."""
