"""A driver that only waits: per-track durations, scaled, and failures drawn or scripted.

It touches nothing else (health is the health service's business), so the executor can run
a whole fleet's rollout on a laptop.
"""

from __future__ import annotations

import asyncio
import random

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
        return DriverOutcome(succeeded=True)
