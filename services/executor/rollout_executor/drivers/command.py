"""A driver that runs a configured program: `[executable, *args, cluster, track, version]`.

The argv goes to exec, never a shell (`rollout_adapters.argv_command`), and cluster and version are checked
against strict patterns first, so a name such as `c1; rm -rf /` is refused, not run. Exit code 0
is success; otherwise the last lines of stderr are the error.

The program's environment is the executor's plus `ROLLOUT_FENCING_TOKEN`, the epoch of the
executor's lease on the target (a decimal integer that only grows from one holder to the next):
a program can pass it on to, or check it against, what it upgrades and refuse a stale holder.

With `probe` set, `observed_version` runs `[*probe, cluster, track]` (same checks, the executor's
environment) and takes the first line it prints as the version the track runs; a failure, a
timeout or nothing printed is "cannot tell" (None), logged.
"""

from __future__ import annotations

import logging
import os

from rollout_adapters.argv_command import run_argv
from rollout_common.errors import InvalidInputError
from rollout_executor.drivers.port import DriverOutcome
from rollout_executor.settings import CommandDriverSettings
from rollout_executor.target import UpgradeTarget, check_cluster_name, check_version

log = logging.getLogger(__name__)

_MAX_ERROR_CHARS = 2000
FENCING_TOKEN_VARIABLE = "ROLLOUT_FENCING_TOKEN"


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

    async def upgrade(self, target: UpgradeTarget, *, fencing_token: int) -> DriverOutcome:
        try:
            argv = self.argv(target)
        except InvalidInputError as exc:
            return DriverOutcome(succeeded=False, error=f"rejected: {exc}")
        env = {**os.environ, FENCING_TOKEN_VARIABLE: str(fencing_token)}
        outcome = await run_argv(argv, timeout_s=self._settings.timeout_s, env=env)
        if outcome.succeeded:
            return DriverOutcome(succeeded=True)
        return DriverOutcome(
            succeeded=False, error=outcome.error(lines=self._settings.stderr_lines, max_chars=_MAX_ERROR_CHARS)
        )

    async def observed_version(self, target: UpgradeTarget) -> str | None:
        if not self._settings.probe:
            return None
        try:
            argv = [*self._settings.probe, check_cluster_name(target.cluster), target.track.value]
        except InvalidInputError as exc:
            log.warning("%s: not probed: %s", target.key, exc)
            return None
        outcome = await run_argv(argv, timeout_s=self._settings.probe_timeout_s, stdout=True)
        answer = (outcome.stdout.strip().splitlines() or [""])[0].strip()
        if not outcome.succeeded or not answer:
            why = (
                "it printed nothing"
                if outcome.succeeded
                else outcome.error(lines=self._settings.stderr_lines, max_chars=_MAX_ERROR_CHARS)
            )
            log.warning("%s: the probe cannot tell the running version: %s", target.key, why)
            return None
        return answer
