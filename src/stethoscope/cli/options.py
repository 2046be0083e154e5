"""What several verbs share: the exit-status epilog, the severity choices, the detectors' threshold options."""

from __future__ import annotations

from typing import Any

import click

from stethoscope.records import SEVERITIES

EXIT_STATUS = """\b
Exit status: 0 fine, 1 findings at or above --fail-on, 2 usage or input error (one line on stderr naming
the file and the problem). Never a traceback: add --debug to see one."""
EXIT_STATUS_NO_FAIL_ON = """\b
Exit status: 0 fine, 2 usage or input error (one line on stderr naming the file and the problem). Never a
traceback: add --debug to see one."""  # for the verbs without --fail-on


SEVERITY = click.Choice(SEVERITIES)
MIN_SEVERITY_HELP = ("Print findings at or above this severity in full; the rest collapse into one line "
                      "[default: warning; --json: all].")

FAIL_ON = click.Choice(["never", "info", "warning", "error", "critical"])


def detect_options(command: Any) -> Any:
    """--set key=value (repeatable) and --config FILE.toml: the detectors' thresholds (DetectConfig)."""
    command = click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                           help="A detector threshold, e.g. --set spike_sigma=8 (repeatable; keys: docs/diagnose.md, "
                                "'Tuning the detectors').")(command)
    return click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
                        metavar="FILE.toml", help="Detector thresholds from the [detect] table of a TOML file "
                                                  "(--set wins).")(command)

