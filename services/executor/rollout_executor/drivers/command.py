"""A driver that runs a configured program: `[executable, *args, cluster, track, version]`.

The argv goes straight to exec, never through a shell, and cluster and version are checked
against strict patterns first, so a name such as `c1; rm -rf /` is refused, not run. Exit code 0
is success; otherwise the last lines of stderr are the error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from rollout_common.errors import InvalidInputError
from rollout_executor.drivers.port import DriverOutcome
from rollout_executor.settings import CommandDriverSettings
from rollout_executor.target import UpgradeTarget, check_cluster_name, check_version

log = logging.getLogger(__name__)

# A killed child gets this long to be reaped before we stop waiting for it.
_REAP_S = 5.0
_MAX_ERROR_CHARS = 2000


class CommandDriver:
    name = "command"

    def __init__(self, settings: CommandDriverSettings) -> None:
        if not settings.executable:
            raise InvalidInputError("the command driver needs command.executable")
        self._settings = settings

    def argv(self, target: UpgradeTarget) -> list[str]:
        # Checked again here: the driver must be safe whoever builds the target.
        cluster = check_cluster_name(target.cluster)
        version = check_version(target.version)
        return [self._settings.executable, *self._settings.args, cluster, target.track.value, version]

    async def upgrade(self, target: UpgradeTarget) -> DriverOutcome:
        try:
            argv = self.argv(target)
        except InvalidInputError as exc:
            return DriverOutcome(succeeded=False, error=f"rejected: {exc}")
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            return DriverOutcome(succeeded=False, error=f"cannot run {argv[0]!r}: {exc}")
        try:
            async with asyncio.timeout(self._settings.timeout_s):
                _, stderr = await process.communicate()
        except TimeoutError:
            await _stopped(process)
            return DriverOutcome(succeeded=False, error=f"timed out after {self._settings.timeout_s:g} s")
        except asyncio.CancelledError:
            await _stopped(process)
            raise
        if process.returncode == 0:
            return DriverOutcome(succeeded=True)
        tail = _last_lines(stderr.decode(errors="replace").splitlines(), self._settings.stderr_lines)
        error = f"exit code {process.returncode}" + (f": {tail}" if tail else "")
        return DriverOutcome(succeeded=False, error=error)


def _last_lines(lines: Sequence[str], count: int) -> str:
    kept = [line for line in lines if line.strip()][-count:]
    # Bounded: a runaway program must not turn one result message into megabytes.
    return "\n".join(kept)[-_MAX_ERROR_CHARS:]


async def _stopped(process: asyncio.subprocess.Process) -> None:
    """Kill the child and reap it, so no zombie or orphaned upgrade outlives the decision."""
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    try:
        async with asyncio.timeout(_REAP_S):
            await process.wait()
    except TimeoutError:
        log.warning("upgrade process %s did not exit after SIGKILL", process.pid)
