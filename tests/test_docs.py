"""The user docs cannot rot: every `stethoscope …` command shown in README.md, docs/ and bench/README.md
names a verb that exists and only options that verb accepts, every relative link points at a file in the
repository, the README keeps CI's test command and its size, and the settings tables (Monitor, Checkpoints)
are the fields' docstrings (regenerate them with `python tests/test_docs.py --write`; the detectors' table:
`python tests/detect/test_config.py --write`)."""

from __future__ import annotations

import ast
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
INLINE = re.compile(r"(?<!`)`(stethoscope [^`]+)`(?!`)")
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
                shown += [(_rel(page), tokens) for tokens in _tokens(" ".join(span.split()))]
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


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, blanks as '-'."""
    headings = re.findall(r"^#+ (.+)$", FENCE.sub("", page.read_text()), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_every_relative_link_points_into_the_repository() -> None:
    broken = []
    for page in PAGES:
        for target in LINK.findall(FENCE.sub("", page.read_text())):
            if re.match(r"^[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            path = (page.parent / file).resolve() if file else page
            if not path.exists() or not path.is_relative_to(ROOT):
                broken.append(f"{_rel(page)}: {target}")
            elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
                broken.append(f"{_rel(page)}: {target} (no such heading)")
    assert not broken


REPO_PATH = re.compile(r"`((?:src|tests|bench|docs)/[^`\s]+)`")
PACKAGE_PATH = re.compile(r"`((?:act|capture|checkpoint|cli|debug|demo|detect|diagnose|explain|exporters|findings|"
                          r"importers|integrations|probe|record|report|serve|store)/[\w/]+\.(?:py|c))`")


def test_every_repository_path_named_in_the_docs_exists() -> None:
    """`src/…`, `tests/…`, `bench/…` paths in code spans (docs/extending.md's file lists above all); a path
    with a placeholder (`<name>`) names its folder."""
    missing = []
    for page in PAGES:
        text = page.read_text()
        scripts = re.findall(r"python3? ((?:bench|tests)/[\w/]+\.py)", text)  # `python bench/x.py` in code blocks
        for path in REPO_PATH.findall(text) + scripts + [f"src/stethoscope/{p}" for p in PACKAGE_PATH.findall(text)]:
            path = path.split("::")[0].rstrip(".,;:)")
            if "<" in path:
                path = path[: path.index("<")].rsplit("/", 1)[0]
            if "/." not in path and not (ROOT / path).exists():
                missing.append(f"{_rel(page)}: {path}")
    assert not missing


def test_the_cli_page_lists_every_command() -> None:
    page = (ROOT / "docs" / "cli.md").read_text()
    for name, command in cli.commands.items():
        for path in ([f"{name} {sub}" for sub in command.commands] if isinstance(command, click.Group) else [name]):
            assert f"| `{path}` |" in page, f"docs/cli.md does not list `stethoscope {path}`"


def test_the_readme_is_short_and_holds_cis_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text().split("# --- the README's test command, verbatim ---\n", 1)[1]
    assert ci.splitlines()[0] in readme.splitlines()
    assert len(readme.splitlines()) <= 250
    assert "../" not in "".join(LINK.findall(readme))


def test_the_diagnose_page_names_every_finding_type() -> None:
    from stethoscope.findings.catalogue import FINDING_TYPES

    text = (ROOT / "docs" / "diagnose.md").read_text()
    listed = text.split("Finding types:", 1)[1].split(". Each type", 1)[0]
    assert sorted(re.findall(r"`(\w+)`", listed)) == sorted(FINDING_TYPES)


SETTINGS = (  # (source, dataclass, page, the table's header line)
    (ROOT / "src" / "stethoscope" / "config.py", "MonitorConfig", ROOT / "docs" / "monitor.md", "| field |"),
    (ROOT / "src" / "stethoscope" / "checkpoint" / "manager.py", "CheckpointConfig", ROOT / "docs" / "checkpoints.md",
     "| field |"),
)


def settings_rows(source: Path, name: str) -> list[str]:
    """A dataclass's table rows: each field's default and its docstring."""
    cls = next(n for n in ast.parse(source.read_text()).body if isinstance(n, ast.ClassDef) and n.name == name)
    rows = []
    for node, nxt in zip(cls.body, [*cls.body[1:], None]):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            doc = nxt.value.value if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) else ""
            default = ast.literal_eval(node.value)
            shown = "none" if default is None else f"{default:_}" if type(default) is int else repr(default)
            rows.append(f"| `{node.target.id}` | {shown} | {' '.join(doc.split()).replace('|', chr(92) + '|')} |")
    return rows


def _table_span(lines: list[str], header: str) -> tuple[int, int]:
    start = next(i for i, line in enumerate(lines) if line.startswith(header)) + 2
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return start, end


@pytest.mark.parametrize("source, name, page, header", SETTINGS, ids=[s[1] for s in SETTINGS])
def test_a_settings_table_is_the_fields_docstrings(source: Path, name: str, page: Path, header: str) -> None:
    lines = page.read_text().splitlines()
    start, end = _table_span(lines, header)
    rows = settings_rows(source, name)
    assert len(rows) >= 5 and all(not row.endswith("|  |") for row in rows), "a field without a docstring"
    assert lines[start:end] == rows, f"{_rel(page)} out of date: python tests/test_docs.py --write"


if __name__ == "__main__":
    import sys

    if "--write" in sys.argv:
        for source, name, page, header in SETTINGS:
            lines = page.read_text().splitlines()
            start, end = _table_span(lines, header)
            page.write_text("\n".join(lines[:start] + settings_rows(source, name) + lines[end:]) + "\n")
