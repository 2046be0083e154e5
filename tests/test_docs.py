"""The user docs cannot rot: every `stethoscope …` command shown in README.md, docs/ and bench/README.md
names a verb that exists and only options that verb accepts, every relative link points at a file in the
repository, and the README keeps CI's test command and its size."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from stethoscope.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", ROOT / "bench" / "README.md", *(ROOT / "docs").rglob("*.md")])
FENCE = re.compile(r"^```.*?\n(.*?)^```", re.S | re.M)
INLINE = re.compile(r"(?<!`)`(stethoscope [^`\n]+)`(?!`)")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
OPERATORS = {"|", "||", "&&", ";", "&", "(", ")", ">", ">>", "<", "2>&1"}
ENV = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def _rel(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _statements(block: str) -> list[str]:
    """A code block's logical lines: a quote left open goes on into the next line (a query over two lines)."""
    out, pending = [], ""
    for line in block.splitlines():
        pending = f"{pending} {line.rstrip().removesuffix(chr(92))}" if pending else line.rstrip().removesuffix(chr(92))
        try:
            shlex.split(pending, comments=True)
        except ValueError:  # an open quote: the statement continues
            continue
        out.append(pending)
        pending = ""
    return out


def _tokens(statement: str) -> list[list[str]]:
    """Each `stethoscope …` command in a shell statement, as tokens (pipes, && and ; split it)."""
    lexer = shlex.shlex(statement.removeprefix("$ "), posix=True, punctuation_chars="|&;()<>")
    lexer.whitespace_split, lexer.commenters = True, "#"
    commands, current = [], []
    for token in lexer:
        if token in OPERATORS or set(token) <= set("|&;()<>"):
            commands.append(current)
            current = []
        else:
            current.append(token)
    commands.append(current)
    found = []
    for tokens in commands:
        while tokens and ENV.match(tokens[0]):
            tokens = tokens[1:]
        if len(tokens) > 1 and tokens[0] == "stethoscope":
            found.append(tokens[1:])
    return found


def shown_commands() -> list[tuple[str, list[str]]]:
    """(page, tokens after `stethoscope`) for every command in the pages' code blocks and inline code."""
    shown = []
    for page in PAGES:
        text = page.read_text()
        for block in FENCE.findall(text):
            for statement in _statements(block):
                shown += [(_rel(page), tokens) for tokens in _tokens(statement)]
        prose = FENCE.sub("", text)
        for span in INLINE.findall(prose):
            try:
                shown += [(_rel(page), tokens) for tokens in _tokens(span)]
            except ValueError:  # an inline span with an unbalanced quote is prose, not a command
                continue
    return shown


def _resolve(tokens: list[str]) -> tuple[list[str], click.Command]:
    """The verb path the tokens name (`ckpt list`) and its command."""
    command: click.Command = cli
    path: list[str] = []
    for token in tokens:
        if not isinstance(command, click.Group) or token not in command.commands:
            break
        command = command.commands[token]
        path.append(token)
    return path, command


def _options(tokens: list[str]) -> list[str]:
    """The options a command line shows: `--foo`, `--foo=x`, `[--foo]`, `-o`; none after a bare `--`."""
    shown = []
    for token in tokens:
        if token == "--":
            break
        token = token.strip("[]")
        if re.match(r"^--?[A-Za-z]", token):
            shown.append(token.split("=", 1)[0])
    return shown


COMMANDS = shown_commands()


def test_the_docs_show_commands_of_every_kind() -> None:
    verbs = {tuple(_resolve(tokens)[0]) for _, tokens in COMMANDS}
    assert len(COMMANDS) > 60 and {("demo",), ("diagnose",), ("ckpt", "verify"), ("probe",)} <= verbs


@pytest.mark.parametrize("page, tokens", COMMANDS, ids=[f"{p}: {' '.join(t)[:60]}" for p, t in COMMANDS])
def test_a_shown_command_exists_and_takes_its_options(page: str, tokens: list[str]) -> None:
    path, command = _resolve(tokens)
    assert path, f"{page}: `stethoscope {' '.join(tokens)}` names no verb"
    assert not isinstance(command, click.Group), f"{page}: `stethoscope {' '.join(tokens)}` names no sub-verb"
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, f"{page}: stethoscope {' '.join(path)} --help: {result.output}"
    accepted = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)} | {"--help", "-h"}
    unknown = [opt for opt in _options(tokens) if opt not in accepted and opt != "--debug"]
    assert not unknown, f"{page}: `stethoscope {' '.join(path)}` does not take {unknown}"


def test_the_check_catches_a_rotten_command() -> None:  # the checks above can fail
    assert _tokens("pip install -e . && WANDB_MODE=offline stethoscope demo --steps 3  # x") == [["demo", "--steps", "3"]]
    assert _options(["runs/x", "[--json]", "--set=a=1", "-o", "--", "--lr"]) == ["--json", "--set", "-o"]
    for rotten in (["ckpt", "list", "runs/x", "--keep-everything"], ["frobnicate", "runs/x"], ["ckpt"]):
        with pytest.raises(AssertionError):
            test_a_shown_command_exists_and_takes_its_options("page.md", rotten)


def test_every_relative_link_points_into_the_repository() -> None:
    broken = []
    for page in PAGES:
        for target in LINK.findall(FENCE.sub("", page.read_text())):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            path = (page.parent / target.split("#", 1)[0]).resolve()
            if not path.exists() or not path.is_relative_to(ROOT):
                broken.append(f"{_rel(page)}: {target}")
    assert not broken


def test_the_readme_is_short_and_holds_cis_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text().split("# --- the README's test command, verbatim ---\n", 1)[1]
    assert ci.splitlines()[0] in readme.splitlines()
    assert len(readme.splitlines()) <= 250
    assert "../" not in "".join(LINK.findall(readme))
