"""A probe that runs a program: `[executable, *args, cluster]`, exit code 0 means ready.

Exec only, never a shell; the cluster name is checked first; a program that hangs is killed
after `timeout_s` and the cluster counts as not ready.
"""

from __future__ import annotations

import asyncio
import contextlib

from rollout_common.errors import InvalidInputError
from rollout_health.cluster_names import check_cluster_name
from rollout_health.probes.port import ProbeResult
from rollout_health.settings import CommandProbeSettings

_REAP_S = 5.0
_MAX_DETAIL_CHARS = 500


class CommandProbe:
    name = "command"

    def __init__(self, settings: CommandProbeSettings) -> None:
        if not settings.executable:
            raise InvalidInputError("the command probe needs command.executable")
        self._settings = settings

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def check(self, cluster: str) -> ProbeResult:
        try:
            argv = [self._settings.executable, *self._settings.args, check_cluster_name(cluster)]
        except InvalidInputError as exc:
            return ProbeResult(ready=False, detail=f"rejected: {exc}")
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            return ProbeResult(ready=False, detail=f"cannot run {argv[0]!r}: {exc}")
        try:
            async with asyncio.timeout(self._settings.timeout_s):
                _, stderr = await process.communicate()
        except TimeoutError:
            await _stopped(process)
            return ProbeResult(ready=False, detail=f"timed out after {self._settings.timeout_s:g} s")
        except asyncio.CancelledError:
            await _stopped(process)
            raise
        if process.returncode == 0:
            return ProbeResult(ready=True)
        lines = [line for line in stderr.decode(errors="replace").splitlines() if line.strip()]
        detail = f"exit code {process.returncode}" + (f": {lines[-1]}" if lines else "")
        return ProbeResult(ready=False, detail=detail[:_MAX_DETAIL_CHARS])


async def _stopped(process: asyncio.subprocess.Process) -> None:
    """Kill and reap: no probe process may outlive its question."""
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(_REAP_S):
            await process.wait()
