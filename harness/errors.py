"""Errors the user can act on: each carries one clear sentence and the exit code to leave with."""

from __future__ import annotations

# Exit codes follow Jepsen (ARCHITECTURE.md, "Exit codes").
EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_UNKNOWN = 2
EXIT_BAD_ARGS = 254
EXIT_CRASH = 255


class LeaselineError(Exception):
    """A failure explained in one sentence; the CLI prints it without a traceback."""

    exit_code = EXIT_CRASH

    def __init__(self, sentence: str, exit_code: int | None = None) -> None:
        super().__init__(sentence)
        if exit_code is not None:
            self.exit_code = exit_code


class BadArguments(LeaselineError):
    exit_code = EXIT_BAD_ARGS


class EnvironmentProblem(LeaselineError):
    """Docker missing, a port in use, a node that never became ready, ..."""

    exit_code = EXIT_CRASH
