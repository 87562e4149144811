"""The `rollout` command's exit codes: one table for every subcommand, shown in `--help` and the docs.

A script can tell what to do from the code alone: 1 means "the request was wrong or refused, do
not repeat it unchanged", 3 "the system is not reachable, try again once it is", 4 "nobody
answered; the request may still be applied, look before repeating it".
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    REJECTED = 1
    USAGE = 2
    UNREACHABLE = 3
    NO_ANSWER = 4
    INTERRUPTED = 130


MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "success: done, or accepted by the planner",
    ExitCode.REJECTED: "rejected by the planner, or invalid input (a bad file, version or stage; a refused login)",
    ExitCode.USAGE: "usage error: an unknown option, a missing or malformed argument",
    ExitCode.UNREACHABLE: "infrastructure unreachable: Kafka or Redis did not answer (try again when they are up)",
    ExitCode.NO_ANSWER: "published, but the planner did not acknowledge in time (see `rollout status`)",
    ExitCode.INTERRUPTED: "interrupted with Ctrl-C (`rollout watch` exits 0 instead)",
}


def table() -> str:
    """The table as `--help` shows it."""
    return "exit codes:\n" + "\n".join(f"  {code.value:<4} {text}" for code, text in MEANINGS.items())


class CliError(Exception):
    """Something the person running the command can act on; printed as one line, no traceback."""

    code: ExitCode = ExitCode.REJECTED


class BadInputError(CliError):
    """A value, file or name that cannot be used as given (or that a server refused)."""

    code = ExitCode.REJECTED


class UnreachableError(CliError):
    """Kafka or Redis did not answer: nothing to fix in the command, try again when they are up."""

    code = ExitCode.UNREACHABLE


class NoAnswerError(CliError):
    """The command went out but its acknowledgement did not come back in time."""

    code = ExitCode.NO_ANSWER


__all__ = ["MEANINGS", "BadInputError", "CliError", "ExitCode", "NoAnswerError", "UnreachableError", "table"]
