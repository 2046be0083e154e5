"""The `stethoscope` command group: verbs in the order a user meets them, and the one error policy of the CLI
(every error one line on stderr with its exit status; never a traceback unless --debug)."""

from __future__ import annotations

import sys
from typing import Any

import click

from stethoscope.errors import StethoscopeError


class Group(click.Group):
    """Verbs listed in the order a user meets them; every error one line on stderr; never a traceback
    unless --debug (anywhere on the command line)."""

    order = ("demo", "show", "diagnose", "report", "query", "runs", "compare", "import", "explain")

    def list_commands(self, ctx: click.Context) -> list[str]:
        first = [name for name in self.order if name in self.commands]
        return first + [name for name in self.commands if name not in first]

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Each verb's whole first line: click would cut it at 45 characters."""
        rows = [(name, self.commands[name].get_short_help_str(limit=200)) for name in self.list_commands(ctx)
                if not self.commands[name].hidden]
        with formatter.section("Commands"):
            formatter.write_dl(rows, col_max=12)

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        debug = "--debug" in argv
        argv = [a for a in argv if a != "--debug"]
        try:
            code = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except BaseException as exc:  # noqa: BLE001 - the one place that turns anything into one line
            code = _report(exc, debug)
        code = code if isinstance(code, int) else 0
        if not standalone_mode:
            return code
        sys.exit(code)


def _report(exc: BaseException, debug: bool) -> int:
    """One line on stderr for `exc`, and the exit status it means."""
    if isinstance(exc, SystemExit):
        return exc.code if isinstance(exc.code, int) else 0
    if debug and not isinstance(exc, click.exceptions.UsageError):
        import traceback

        traceback.print_exception(exc)
    if isinstance(exc, click.exceptions.UsageError):
        where = f"{exc.ctx.command_path} --help" if exc.ctx is not None else "stethoscope --help"
        message = exc.format_message().rstrip(".")
        _err(f"{message[:1].lower()}{message[1:]} (see: {where})")
        return 2
    if isinstance(exc, click.ClickException):
        _err(exc.format_message())
        return exc.exit_code
    if isinstance(exc, (KeyboardInterrupt, click.exceptions.Abort)):
        _err("interrupted")
        return 130
    if isinstance(exc, BrokenPipeError):  # `stethoscope query … | head`: the reader left, nothing to say
        return 0
    if isinstance(exc, StethoscopeError):
        _err(str(exc))
        return exc.exit_code
    if isinstance(exc, OSError):
        _err(f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else str(exc))
        return 2
    _err(f"could not finish ({type(exc).__name__}: {exc}); run again with --debug for the traceback, "
         "and please report it")
    return 2


def _err(message: str) -> None:
    one_line = " ".join(str(message).split())
    try:
        click.echo(f"stethoscope: error: {one_line}", err=True)
    except (BrokenPipeError, OSError):
        pass

