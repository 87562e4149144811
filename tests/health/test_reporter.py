"""The reporter publishes a heartbeat on change and when the last one is old enough."""

from __future__ import annotations

import pytest

from rollout_adapters.memory_bus import MemoryBus
from rollout_common.envelope import decode
from rollout_common.errors import TransientError
from rollout_common.heartbeat import Heartbeat
from rollout_common.topics.catalog import HEARTBEATS
from rollout_health.probes.port import ProbeResult
from rollout_health.reporter import Reporter

# One loop for the whole session, as the async fixtures use (pyproject).
pytestmark = pytest.mark.asyncio(loop_scope="session")


class ScriptedProbe:
    name = "scripted"

    def __init__(self) -> None:
        self.ready: dict[str, bool] = {}

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def check(self, cluster: str) -> ProbeResult:
        return ProbeResult(ready=self.ready.get(cluster, True))


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_heartbeats_on_change_and_every_interval() -> None:
    bus = MemoryBus()
    await bus.ensure_topics([HEARTBEATS.spec()])
    probe, clock = ScriptedProbe(), FakeClock()
    reporter = Reporter(
        bus=bus, probe=probe, clusters=["c1", "c2"], reporter_id="r1", heartbeat_interval_s=30, clock=clock
    )
    sent = [(h.cluster, h.ready) for h in await reporter.tick()]
    assert sent == [("c1", True), ("c2", True)]
    clock.now += 10
    assert await reporter.tick() == []  # nothing changed, nothing due
    probe.ready["c2"] = False
    assert [(h.cluster, h.ready) for h in await reporter.tick()] == [("c2", False)]
    clock.now += 25  # c1's last heartbeat is now 35 s old, c2's 25 s
    assert [(h.cluster, h.ready) for h in await reporter.tick()] == [("c1", True)]
    records = bus.records(HEARTBEATS.name)
    assert len(records) == 4
    _, first = decode(records[0].value, records[0].headers, HEARTBEATS.models)
    assert isinstance(first, Heartbeat) and first.reporter == "r1"
    assert {r.key for r in records} == {b"c1", b"c2"}
    await bus.close()


async def test_a_heartbeat_the_broker_did_not_take_is_published_by_the_next_round() -> None:
    """A round publishes its heartbeats side by side, so with the broker gone a round of 3 clusters
    waits for the bus's bound once, not three times; one not taken makes the reporter not ready,
    and the next round publishes it (none is lost: an unpublished heartbeat is not marked sent)."""
    bus = MemoryBus()
    await bus.ensure_topics([HEARTBEATS.spec()])
    probe, clock = ScriptedProbe(), FakeClock()
    reporter = Reporter(
        bus=bus, probe=probe, clusters=["c1", "c2", "c3"], reporter_id="r1", heartbeat_interval_s=30, clock=clock
    )
    bus.fail_next_publish(TransientError("broker away"))
    assert [h.cluster for h in await reporter.tick()] == ["c2", "c3"]
    assert reporter.ready is False
    assert [r.key for r in bus.records(HEARTBEATS.name)] == [b"c2", b"c3"]
    clock.now += 1
    assert [h.cluster for h in await reporter.tick()] == ["c1"]
    assert reporter.ready is True
    await bus.close()
