"""The exception tree. Imports nothing from the package.

    StethoscopeError                 base of everything we raise on purpose
    ├── UsageError                   bad input from a person: exit status 2 in the CLI
    │   ├── InputError               a file that is missing, unreadable, malformed or of no known format
    │   ├── NotARunError             a path that holds no run store
    │   └── QueryRefused             SQL that tries to write, ATTACH or change pragmas
    └── InternalError                a failure inside stethoscope (counted; re-raised only when strict)

Inside the user's training process nothing here propagates unless `strict=True`; the CLI turns every
UsageError into one line on stderr and exit status 2.
"""

from __future__ import annotations


class StethoscopeError(Exception):
    """Base class of every error stethoscope raises on purpose."""

    exit_code = 1


class UsageError(StethoscopeError):
    """Bad input from a person (a path, a flag, a query); the CLI exits with status 2."""

    exit_code = 2


class InputError(UsageError):
    """A file that is missing, unreadable, malformed or of no known format.

    The message names the file and, where it applies, the line or step and what was expected.
    """

    def __init__(self, path: object, problem: str, line: int | None = None) -> None:
        self.path = str(path)
        self.line = line
        self.problem = problem
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {problem}")


class NotARunError(UsageError):
    """A path that holds no stethoscope run store."""


class QueryRefused(UsageError):
    """SQL that tries to write, ATTACH a database or change a pragma."""


class InternalError(StethoscopeError):
    """A failure inside stethoscope itself."""
