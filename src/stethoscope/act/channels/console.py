"""The console: a rich panel on stderr (the training's own output stays on stdout)."""

from __future__ import annotations

from typing import Any

from stethoscope.act.alert import Alert

_STYLE = {"info": "blue", "warning": "yellow", "error": "red", "critical": "bold red"}


class Console:
    """Prints each alert as a panel; `file` (default stderr) for tests."""

    name = "console"
    target = "stderr"

    def __init__(self, min_severity: str = "warning", file: Any = None) -> None:
        self.min_severity = min_severity
        self._file = file
        self._console: Any = None

    def send(self, alert: Alert) -> None:
        from rich.console import Console as RichConsole
        from rich.panel import Panel
        from rich.table import Table

        if self._console is None:
            self._console = RichConsole(file=self._file, stderr=self._file is None, highlight=False)
        grid = Table.grid(padding=(0, 1))
        for label, text in alert.lines():
            grid.add_row(f"[bold]{label}[/]", text)
        style = "green" if alert.kind == "resolve" else _STYLE.get(alert.severity, "")
        self._console.print(Panel(grid, title=alert.title(), title_align="left", border_style=style))
