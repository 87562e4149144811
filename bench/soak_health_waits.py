"""The sustained health run's waits: each is bounded, and one that runs out says what it saw.

A run that stops moving (a monitor that no longer commits a partition, a planner that never
advances a stage, a worker its supervisor keeps restarting) must end as a failure that names the
side that stalled, never as a test that hangs. `Progress` is that evidence: per partition, what is
on the heartbeats and readiness topics beside what the monitors and the planner committed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from bench.health_scaling import APP_ID
from bench.kafka_common import Services
from rollout_common.topics.catalog import HEARTBEATS, READINESS, STAGE_ADVANCE

POLL_S = 0.2
# what the monitor's supervisor logs when its faust worker ended and is started again
WORKER_EXITED = "monitor worker exited"


class StalledError(RuntimeError):
    """A wait of the run ran out: the message says what it waited for and what it saw."""


@dataclass(frozen=True)
class Progress:
    heartbeats: dict[int, int]  # partition -> end offset
    monitors_committed: dict[int, int]
    readiness: dict[int, int]
    planner_committed: dict[int, int]
    stage_advances: int
    monitor_group: str

    def behind(self) -> dict[int, tuple[int, int]]:
        """Heartbeat partitions the monitors have not committed to the end: partition -> (committed, end)."""
        return {
            p: (self.monitors_committed.get(p, 0), end)
            for p, end in sorted(self.heartbeats.items())
            if self.monitors_committed.get(p, 0) < end
        }

    def __str__(self) -> str:
        behind = ", ".join(f"{p}: {done} of {end}" for p, (done, end) in self.behind().items()) or "none"
        return (
            f"heartbeat partitions the monitors have not committed to the end: {behind}; "
            f"heartbeats end {_pairs(self.heartbeats)}, committed by the monitors "
            f"{_pairs(self.monitors_committed)} ({self.monitor_group}); readiness end "
            f"{_pairs(self.readiness)}, committed by the planner {_pairs(self.planner_committed)}; "
            f"stage-advances {self.stage_advances}"
        )


def _pairs(offsets: dict[int, int]) -> str:
    return json.dumps({str(p): offsets[p] for p in sorted(offsets)})


async def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        ends = await consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
        return {tp.partition: offset for tp, offset in ends.items()}
    finally:
        await consumer.stop()


async def committed(admin: AIOKafkaAdminClient, group: str, topic: str) -> dict[int, int]:
    offsets = await admin.list_consumer_group_offsets(group)
    return {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == topic and meta.offset >= 0}


async def _group_state(admin: AIOKafkaAdminClient, group: str) -> str:
    for response in await admin.describe_consumer_groups([group]):
        for described in response.groups:
            return f"group {described[2]} with {len(described[5])} members"
    return "group unknown"


async def progress(bootstrap: str, prefix: str, *, heartbeat_partitions: int) -> Progress:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return Progress(
            heartbeats=await end_offsets(bootstrap, prefix + HEARTBEATS.name, heartbeat_partitions),
            monitors_committed=await committed(admin, prefix + APP_ID, prefix + HEARTBEATS.name),
            readiness=await end_offsets(bootstrap, prefix + READINESS.name, READINESS.partitions),
            planner_committed=await committed(admin, prefix + "planner", prefix + READINESS.name),
            stage_advances=sum(
                (await end_offsets(bootstrap, prefix + STAGE_ADVANCE.name, STAGE_ADVANCE.partitions)).values()
            ),
            monitor_group=await _group_state(admin, prefix + APP_ID),
        )
    finally:
        await admin.close()


def check_services(services: Services) -> None:
    """Raise if a service process ended, or a monitor's faust worker did (its supervisor restarts
    it, so the process lives on): either way the run no longer measures what it says."""
    services.check()
    for name in services.running:
        if name.startswith("monitor") and WORKER_EXITED in services.tail(name, chars=100_000):
            raise StalledError(f"soak-health: {name}'s worker exited and was restarted:\n{services.tail(name)}")


async def until(
    condition: Callable[[], Awaitable[bool]],
    *,
    timeout_s: float,
    what: str,
    services: Services,
    seen: Callable[[], Awaitable[object]],
) -> None:
    """Poll `condition` until it holds; past `timeout_s`, raise `StalledError` with what `seen` shows."""
    try:
        async with asyncio.timeout(timeout_s):
            while not await condition():
                check_services(services)
                await asyncio.sleep(POLL_S)
    except TimeoutError:
        pass
    else:
        return
    raise StalledError(f"soak-health: {what} not within {timeout_s:.0f} s; seen: {await _describe(seen)}")


async def _describe(seen: Callable[[], Awaitable[object]]) -> str:
    try:
        async with asyncio.timeout(30):
            return str(await seen())
    except Exception as exc:  # the evidence is best effort: the stall is the failure to report
        return f"(could not read the run's progress: {type(exc).__name__}: {exc})"
