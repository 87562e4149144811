"""Executor tests' doubles: a driver that counts, and helpers to send commands and read results."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable

from rollout_adapters.memory_bus import MemoryBus
from rollout_common.commands import StageAdvance
from rollout_common.envelope import decode, encode
from rollout_common.events import UpgradeResult
from rollout_common.status import Track
from rollout_common.topics.catalog import DEAD_LETTER, STAGE_ADVANCE, UPGRADE_RESULTS
from rollout_executor.drivers.port import DriverOutcome
from rollout_executor.executor import Executor
from rollout_executor.target import UpgradeTarget


class CountingDriver:
    """Records every upgrade it runs; each takes `seconds`; clusters in `failing` fail."""

    name = "counting"

    def __init__(self, *, seconds: float = 0.01, failing: frozenset[str] = frozenset()) -> None:
        self.seconds = seconds
        self.failing = failing
        self.calls: Counter[str] = Counter()
        self.fencing_tokens: list[tuple[str, int]] = []
        self.running = 0
        self.most_at_once = 0
        self.started = asyncio.Event()  # set once an upgrade runs, for a test to act mid-upgrade

    async def upgrade(self, target: UpgradeTarget, *, fencing_token: int) -> DriverOutcome:
        self.calls[target.cluster] += 1
        self.fencing_tokens.append((target.cluster, fencing_token))
        self.started.set()
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            await asyncio.sleep(self.seconds)
        finally:
            self.running -= 1
        if target.cluster in self.failing:
            return DriverOutcome(succeeded=False, error="boom")
        return DriverOutcome(succeeded=True)


def stage_advance(command_id: str, clusters: tuple[str, ...], *, version: str = "1.31.2") -> StageAdvance:
    return StageAdvance(
        command_id=command_id,
        rollout_id="r1",
        stage="canary",
        track=Track.CONTROL_PLANE,
        partition="p0",
        version=version,
        clusters=clusters,
    )


async def send(bus: MemoryBus, command: StageAdvance) -> None:
    value, headers = encode(command, event_id=command.command_id, source="test", at=0.0)
    await bus.publish(STAGE_ADVANCE.name, key=command.command_id.encode(), value=value, headers=headers)


def results(bus: MemoryBus) -> list[UpgradeResult]:
    decoded = [decode(r.value, r.headers, UPGRADE_RESULTS.models)[1] for r in bus.records(UPGRADE_RESULTS.name)]
    return [r for r in decoded if isinstance(r, UpgradeResult)]


def dead_letters(bus: MemoryBus) -> list[dict[str, bytes]]:
    return [dict(r.headers) for r in bus.records(DEAD_LETTER.name)]


ExecutorFactory = Callable[..., Executor]
