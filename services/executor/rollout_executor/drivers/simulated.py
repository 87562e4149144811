"""A driver that only waits: per-track durations, scaled, and failures drawn or scripted.

It touches nothing else (health is the health service's business), so the executor can run
a whole fleet's rollout on a laptop. With `world_file` set it keeps a simulated fleet's state
beyond the executor process: a completed upgrade appends `cluster track version fencing-token`
to that file in one O_APPEND write (a line is there whole or not at all, whoever else appends,
however the process ends), and the last line of a cluster and track is the version it runs,
which is what `observed_version` answers. The file is also the record of every upgrade that took
effect, for an audit independent of what the executors recorded.
"""

from __future__ import annotations

import asyncio
import os
import random
from pathlib import Path

from rollout_executor.drivers.port import DriverOutcome
from rollout_executor.settings import SimulatedDriverSettings
from rollout_executor.target import UpgradeTarget


class SimulatedDriver:
    name = "simulated"

    def __init__(self, settings: SimulatedDriverSettings) -> None:
        self._settings = settings
        self._random = random.Random(settings.seed)

    async def upgrade(self, target: UpgradeTarget, *, fencing_token: int) -> DriverOutcome:
        seconds = self._settings.durations_s.get(target.track, 0.0) * self._settings.time_scale
        await asyncio.sleep(seconds)
        if target.cluster in self._settings.failing_clusters:
            return DriverOutcome(succeeded=False, error="simulated failure (failing_clusters)")
        if self._random.random() < self._settings.failure_rate:
            return DriverOutcome(succeeded=False, error="simulated failure (failure_rate)")
        if self._settings.world_file is not None:
            line = f"{target.cluster} {target.track.value} {target.version} {fencing_token}\n"
            await asyncio.to_thread(_append, self._settings.world_file, line)
        return DriverOutcome(succeeded=True)

    async def observed_version(self, target: UpgradeTarget) -> str | None:
        if self._settings.world_file is None:
            return None
        return await asyncio.to_thread(running_version, self._settings.world_file, target)


def _append(path: Path, line: str) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, line.encode())
    finally:
        os.close(descriptor)


def running_version(path: Path, target: UpgradeTarget) -> str | None:
    """The version of the last completed upgrade of the target's cluster and track in the world
    file; None when it has none (the version it started from is not kept)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    found = None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] == target.cluster and parts[1] == target.track.value:
            found = parts[2]
    return found
