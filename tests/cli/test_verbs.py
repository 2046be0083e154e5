"""One way to add a verb: each cli/*_view.py lists its commands in COMMANDS; cli/main.py only registers them."""

from __future__ import annotations

import ast
from pathlib import Path

from stethoscope.cli import main

MAIN = Path(main.__file__)


def test_every_verb_comes_from_a_view_s_commands_and_each_once():
    listed = [command.name for view in main.VIEWS for command in view.COMMANDS]
    assert len(listed) == len(set(listed)), listed
    assert sorted(listed) == sorted(main.cli.commands)
    assert {"demo", "diagnose", "query", "export", "ckpt", "probe"} <= set(listed)
    assert "parquet" in main.cli.commands["export"].commands  # a subcommand, added by the export view


def test_main_defines_no_verb_and_computes_nothing():
    tree = ast.parse(MAIN.read_text())
    functions = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    assert functions == ["cli", "main"], functions
    assert len(MAIN.read_text().splitlines()) <= 250
