"""`stethoscope dashboard [RUN…] [--port]`: the live web dashboard on 127.0.0.1 (serve/dashboard.py)."""

from __future__ import annotations

import errno
import webbrowser
from pathlib import Path

import click

from stethoscope.cli.listing import find_runs
from stethoscope.config import env_runs_dir
from stethoscope.errors import UsageError
from stethoscope.store.query import is_run


def _resolver(paths: tuple[str, ...]):  # noqa: ANN202 - a closure the App calls on each runs request
    """RUN arguments → the runs they name: a run directory is itself; a folder is every run under it (looked
    up again on each request, so a run started later appears)."""
    given = [Path(p) for p in paths] or [Path(env_runs_dir())]
    for p in given:
        if not p.exists():
            raise UsageError(f"{p}: no such file or directory (give a run directory, or the folder that holds runs)")
    if not any(is_run(p) or find_runs(p) for p in given if p.is_dir()):
        raise UsageError(f"{', '.join(map(str, given))}: no runs here (a run is a folder with rank-*.sqlite files; "
                         "make one with `stethoscope demo`)")

    def runs() -> list[Path]:
        out: list[Path] = []
        for p in given:
            for run in ([p] if is_run(p) else find_runs(p) if p.is_dir() else []):
                if run not in out:
                    out.append(run)
        return out
    return runs


@click.command(epilog="Serves on 127.0.0.1 only; stop it with Ctrl-C. Exit status 2: a RUN that is not there, "
                      "or a port in use (one line on stderr).")
@click.argument("runs", nargs=-1, type=click.Path())
@click.option("--port", type=click.IntRange(0, 65535), default=8050, show_default=True,
              help="Port on 127.0.0.1 (0: any free port).")
@click.option("--poll", type=click.FloatRange(0.2, 3600), default=2.0, show_default=True,
              help="Seconds between the page's updates of a live run.")
@click.option("--open", "open_browser", is_flag=True, help="Open the page in the default browser.")
def dashboard(runs: tuple[str, ...], port: int, poll: float, open_browser: bool) -> None:
    """A live web dashboard of runs on 127.0.0.1: curves, findings, alerts, checkpoints, compare.

    RUN… are run directories or folders of runs (default $STETHOSCOPE_RUNS or ./runs). Per run: loss and
    eval loss, grad norm, LR, throughput and MFU, memory, step time, per-rank lines, updated as the run
    trains; findings with causes and fixes; alerts; checkpoints and rollbacks; compare two runs.

    \b
    Examples:
      stethoscope dashboard runs/
      stethoscope dashboard runs/demo --port 8080 --open
    """
    from stethoscope.serve.dashboard import App
    from stethoscope.serve.http import Server

    app = App(_resolver(runs), poll_ms=int(poll * 1000))
    try:
        server = Server(app, "127.0.0.1", port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise UsageError(f"port {port} is in use on 127.0.0.1; give another with --port (or --port 0)") from None
        raise UsageError(f"cannot listen on 127.0.0.1:{port} ({exc.strerror or exc})") from None
    click.echo(f"stethoscope dashboard: {server.url}  ({len(app.runs())} run(s); Ctrl-C to stop)", err=False)
    if open_browser:
        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


COMMANDS = [dashboard]
