"""A probe that runs a program: `[executable, *args, cluster]`, exit code 0 means ready.

Exec only, never a shell; the cluster name is checked first; a program that hangs is killed
after `timeout_s` and the cluster counts as not ready.
"""

from __future__ import annotations

from rollout_adapters.argv_command import run_argv
from rollout_common.errors import InvalidInputError
from rollout_common.safe_names import check_cluster_name
from rollout_health.probes.port import ProbeResult
from rollout_health.settings import CommandProbeSettings

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
        outcome = await run_argv(argv, timeout_s=self._settings.timeout_s)
        if outcome.succeeded:
            return ProbeResult(ready=True)
        return ProbeResult(ready=False, detail=outcome.error(lines=1, max_chars=_MAX_DETAIL_CHARS))
