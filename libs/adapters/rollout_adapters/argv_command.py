"""Run a program from an argv list, bounded in time, and keep the end of its stderr.

Exec only, never a shell; stdin is closed, and so is stdout unless the caller wants what the
program prints (then its first `_STDOUT_CHARS` are kept); a program that outlives `timeout_s` (or
whose caller is cancelled) is killed and reaped, so no orphan outlives the question it answers.
Used by the executor's command driver and the health command probe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

log = logging.getLogger(__name__)

# A killed child gets this long to be reaped before we stop waiting for it.
_REAP_S = 5.0
# A program's answer is a line or two, and a failure is told by stderr's last lines: a runaway one
# must not fill the caller's memory, so no more than this is ever held of either (the rest is read
# and dropped, so the program never blocks on a full pipe).
_STDOUT_CHARS = 4096
_STDERR_BYTES = 65536
_CHUNK = 65536


@dataclass(frozen=True)
class CommandOutcome:
    """`returncode` None: the program did not run to an end (`problem` says why)."""

    returncode: int | None
    stderr: str = ""
    problem: str = ""
    stdout: str = ""

    @property
    def succeeded(self) -> bool:
        return self.returncode == 0

    def error(self, *, lines: int, max_chars: int) -> str:
        """One bounded description of a failure: the problem, or the exit code and stderr's last lines."""
        if self.returncode is None:
            return self.problem
        kept = [line for line in self.stderr.splitlines() if line.strip()][-lines:]
        # Bounded: a runaway program must not turn one message into megabytes.
        tail = "\n".join(kept)[-max_chars:]
        return f"exit code {self.returncode}" + (f": {tail}" if tail else "")


async def run_argv(
    argv: Sequence[str], *, timeout_s: float, env: Mapping[str, str] | None = None, stdout: bool = False
) -> CommandOutcome:
    """Run `argv` to its end or until `timeout_s`; never raises for the program's failures.

    `env`: the program's whole environment (None: this process's); `stdout`: keep what it prints."""
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE if stdout else asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env=None if env is None else dict(env),
        )
    except OSError as exc:
        return CommandOutcome(None, problem=f"cannot run {argv[0]!r}: {exc}")
    try:
        async with asyncio.timeout(timeout_s):
            printed, stderr, _ = await asyncio.gather(
                _head(process.stdout, _STDOUT_CHARS), _tail(process.stderr, _STDERR_BYTES), process.wait()
            )
    except TimeoutError:
        await _stopped(process)
        return CommandOutcome(None, problem=f"timed out after {timeout_s:g} s")
    except asyncio.CancelledError:
        await _stopped(process)
        raise
    return CommandOutcome(
        process.returncode,
        stderr=stderr.decode(errors="replace"),
        stdout=printed.decode(errors="replace"),
    )


async def _head(stream: asyncio.StreamReader | None, limit: int) -> bytes:
    """The first `limit` bytes of `stream`, read to its end."""
    kept = bytearray()
    while stream is not None and (chunk := await stream.read(_CHUNK)):
        kept += chunk[: max(0, limit - len(kept))]
    return bytes(kept)


async def _tail(stream: asyncio.StreamReader | None, limit: int) -> bytes:
    """The last `limit` bytes of `stream`, read to its end."""
    kept = bytearray()
    while stream is not None and (chunk := await stream.read(_CHUNK)):
        kept += chunk
        del kept[:-limit]
    return bytes(kept)


async def _stopped(process: asyncio.subprocess.Process) -> None:
    """Kill the child and reap it."""
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    try:
        async with asyncio.timeout(_REAP_S):
            await process.wait()
    except TimeoutError:
        log.warning("process %s did not exit after SIGKILL", process.pid)


__all__ = ["CommandOutcome", "run_argv"]
