"""The simulated probe reads upgrade results without a consumer group (BUS-6).

A group member depends on the broker coordinating its group: when that broker was killed, the
probe's throwaway group stayed stuck on a coordinator "not started or not valid" and the probe
stopped learning of upgrades for good. Assigning itself every partition needs no coordinator.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from rollout_adapters.kafka_bus import KafkaBus
from rollout_common.envelope import encode
from rollout_common.events import UpgradeResult
from rollout_common.status import Track
from rollout_common.topics.catalog import UPGRADE_RESULTS
from rollout_health.probes.port import ProbeResult
from rollout_health.probes.simulated import SimulatedProbe
from rollout_health.settings import SimulatedProbeSettings

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

_WAIT_S = 30.0


async def _publish(bus: KafkaBus, topic: str, cluster: str, outcome: str) -> None:
    result = UpgradeResult.model_validate(
        {"commandId": "cmd-1", "cluster": cluster, "track": Track.NODES, "version": "1.31.2", "outcome": outcome}
    )
    value, headers = encode(result, event_id=f"cmd-1/{cluster}/{outcome}", source="test", at=time.time())
    await bus.publish(topic, key=cluster.encode(), value=value, headers=headers)


async def _until_upgrading(probe: SimulatedProbe, cluster: str) -> None:
    deadline = time.monotonic() + _WAIT_S
    while time.monotonic() < deadline:
        if await probe.check(cluster) == ProbeResult(ready=False, detail="nodes upgrading"):
            return
        await asyncio.sleep(0.1)
    pytest.fail(f"the probe did not learn of {cluster}'s upgrade within {_WAIT_S:g} s")


async def _groups(bootstrap: str) -> set[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return {str(group[0]) for group in await admin.list_consumer_groups()}
    finally:
        await admin.close()


async def test_the_probe_reads_every_partition_from_the_beginning_and_creates_no_group(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    prefix = f"{topic_prefix}."
    topic = prefix + UPGRADE_RESULTS.name
    bus = KafkaBus(kafka_bootstrap, client_id=prefix)
    await bus.ensure_topics([UPGRADE_RESULTS.spec(prefix)])
    groups_before = await _groups(kafka_bootstrap)
    # Published before the probe starts: a restarted reporter must still see it.
    await _publish(bus, topic, "c1", "started")
    probe = SimulatedProbe(SimulatedProbeSettings(), bus=bus, topic_prefix=prefix)
    await probe.start()
    try:
        await _until_upgrading(probe, "c1")
        # Keys spread over the topic's 16 partitions: every one is read, not a member's share.
        for n in range(2, 10):
            await _publish(bus, topic, f"c{n}", "started")
        for n in range(2, 10):
            await _until_upgrading(probe, f"c{n}")
        assert await _groups(kafka_bootstrap) == groups_before
    finally:
        await probe.close()
        await bus.close()
