"""Every verb's --help as a new user reads it (user-trial): the exit-status note names --fail-on only where the
verb has that option (import, report, show, ... said "1 findings at or above --fail-on" without one), and a
verb's first example runs that verb (`export grafana --help` showed a Parquet export)."""

from __future__ import annotations

import click
import pytest

from stethoscope.cli.main import cli


def _leaves(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    out = []
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            out += _leaves(cmd, (*path, name))
        else:
            out.append(((*path, name), cmd))
    return out


LEAVES = _leaves(cli)


def test_the_walk_finds_the_verbs():
    names = {" ".join(p) for p, _ in LEAVES}
    assert {"diagnose", "import", "report", "show", "export grafana", "export parquet"} <= names


@pytest.mark.parametrize("path,cmd", LEAVES, ids=[" ".join(p) for p, _ in LEAVES])
def test_the_exit_status_note_names_fail_on_only_where_it_is_an_option(path, cmd):
    has = any(isinstance(p, click.Option) and "--fail-on" in p.opts for p in cmd.params)
    assert ("--fail-on" in (cmd.epilog or "")) == has or not cmd.epilog


@pytest.mark.parametrize("path,cmd", LEAVES, ids=[" ".join(p) for p, _ in LEAVES])
def test_the_first_example_runs_the_verb_itself(path, cmd):
    examples = [line.strip() for line in (cmd.help or "").splitlines() if line.strip().startswith("stethoscope ")]
    if examples:
        assert examples[0].startswith("stethoscope " + " ".join(path) + " ") or \
            examples[0] == "stethoscope " + " ".join(path)
