"""The `stethoscope` command: the verbs each `cli/*_view.py` exports in its `COMMANDS`, in one group.

A new verb: write its click command in a view module (its work in a module of its own when it is more
than a few lines), list it in that module's `COMMANDS`, and add the module to `VIEWS` below (the order
of `--help` after `Group.order`, cli/group.py). Exit status: 0 fine, 1 findings at or above --fail-on,
2 bad input (cli/group.py turns every error into one line).
"""

from __future__ import annotations

import sys

import click

from stethoscope import __version__
from stethoscope.cli import (alerts_view, ckpt_view, dashboard_view, datacheck_view, debug_view, demo_view,
                             diagnose_view, estimate_view, export_view, probe_view, query_view, runs_view, watch_view)
from stethoscope.cli.group import Group
from stethoscope.cli.options import EXIT_STATUS

VIEWS = (demo_view, alerts_view, runs_view, query_view, diagnose_view, ckpt_view, export_view, watch_view,
         debug_view, datacheck_view, estimate_view, dashboard_view, probe_view)


@click.group("stethoscope", cls=Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
             epilog=EXIT_STATUS)
@click.version_option(__version__, prog_name="stethoscope")
@click.option("--debug", is_flag=True, help="Show the traceback of an error (also accepted after the verb).")
def cli(debug: bool) -> None:
    """Keeps watch over deep-learning training runs and tells you what is wrong, why, and what to do.

    \b
    Start here:
      stethoscope demo                     train a tiny GPT on CPU with stethoscope watching
      stethoscope diagnose runs/demo       what went wrong, at which step, why, what to do
      stethoscope explain slurm-1234.out   name the failure in a crash log
    """


for view in VIEWS:
    for command in view.COMMANDS:
        cli.add_command(command)


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="stethoscope")


if __name__ == "__main__":
    main(sys.argv[1:])
