"""The simulated reporter as a process: upgrade results in, heartbeats out, on the real broker."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from rollout_adapters.kafka_bus import KafkaBus
from rollout_common.envelope import decode, encode
from rollout_common.events import UpgradeResult
from rollout_common.heartbeat import Heartbeat
from rollout_common.status import Track
from rollout_common.topics.catalog import HEARTBEATS, UPGRADE_RESULTS

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

_STOP_S = 15.0


@pytest.fixture
def reporter_process(kafka_bootstrap: str, topic_prefix: str) -> Iterator[subprocess.Popen[bytes]]:
    env = {
        **os.environ,
        "ROLLOUT_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "ROLLOUT_TOPIC_PREFIX": f"{topic_prefix}.",
        "ROLLOUT_CLUSTERS": '["c1", "c2"]',
        "ROLLOUT_PROBE_INTERVAL_S": "0.2",
        "ROLLOUT_HEARTBEAT_INTERVAL_S": "30",
        "ROLLOUT_SIMULATED__READY_AFTER_S": "1",
    }
    process = subprocess.Popen([sys.executable, "-m", "rollout_health", "reporter"], env=env)
    yield process
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(_STOP_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def _publish(kafka_bootstrap: str, topic: str, cluster: str, outcome: str) -> None:
    result = UpgradeResult.model_validate(
        {"commandId": "cmd-1", "cluster": cluster, "track": Track.NODES, "version": "1.31.2", "outcome": outcome}
    )
    value, headers = encode(result, event_id=f"cmd-1/{cluster}/{outcome}", source="test", at=time.time())
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        await producer.send_and_wait(topic, value, key=cluster.encode(), headers=list(headers.items()))
    finally:
        await producer.stop()


async def test_an_upgrade_makes_the_cluster_not_ready_until_it_settles(
    kafka_bootstrap: str, topic_prefix: str, reporter_process: subprocess.Popen[bytes]
) -> None:
    prefix = f"{topic_prefix}."
    bus = KafkaBus(kafka_bootstrap, client_id=f"{topic_prefix}-setup")
    await bus.ensure_topics([HEARTBEATS.spec(prefix), UPGRADE_RESULTS.spec(prefix)])
    await bus.close()
    consumer = AIOKafkaConsumer(
        prefix + HEARTBEATS.name, bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest"
    )
    await consumer.start()
    beats: list[tuple[str, bool, str | None]] = []

    async def until(expected: tuple[str, bool, str | None], *, count: int = 1, timeout_s: float) -> None:
        async with asyncio.timeout(timeout_s):
            while beats.count(expected) < count:
                for batch in (await consumer.getmany(timeout_ms=300)).values():
                    for message in batch:
                        _, beat = decode(message.value or b"", dict(message.headers), HEARTBEATS.models)
                        assert isinstance(beat, Heartbeat)
                        beats.append((beat.cluster, beat.ready, beat.detail))

    try:
        await until(("c1", True, None), timeout_s=30)
        await _publish(kafka_bootstrap, prefix + UPGRADE_RESULTS.name, "c1", "started")
        await until(("c1", False, "nodes upgrading"), timeout_s=15)
        await _publish(kafka_bootstrap, prefix + UPGRADE_RESULTS.name, "c1", "succeeded")
        started = time.monotonic()
        # Heartbeats follow readiness, not its detail: "settling" sends nothing new, and c1
        # turns ready once `ready_after_s` has passed.
        await until(("c1", True, None), count=2, timeout_s=10)
    finally:
        await consumer.stop()
    assert time.monotonic() - started >= 0.5
    assert [b for b in beats if b[0] == "c1"] == [
        ("c1", True, None),
        ("c1", False, "nodes upgrading"),
        ("c1", True, None),
    ]
    assert [b for b in beats if b[0] == "c2"] == [("c2", True, None)]  # unchanged: one heartbeat
    reporter_process.send_signal(signal.SIGTERM)
    assert reporter_process.wait(_STOP_S) == 0
