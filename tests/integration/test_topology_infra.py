"""The production-topology test infrastructure itself: a three-node KRaft cluster that survives the
loss of a partition leader and of the active controller, and Redis whose Sentinels promote the
replica when the primary dies (BUS-3, BUS-6: what the failover tests build on)."""

from __future__ import annotations

import asyncio

import pytest
import redis
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from rollout_devenv import KafkaCluster, RedisSentinelGroup

pytestmark = pytest.mark.integration


async def _create(bootstrap: str, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        await admin.start()
        await admin.create_topics(
            [NewTopic(topic, num_partitions=1, replication_factor=3, topic_configs={"min.insync.replicas": "2"})]
        )
    finally:
        await admin.close()


async def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    try:
        await producer.start()
        for value in values:
            await producer.send_and_wait(topic, value)
    finally:
        await producer.stop()


async def _read_all(bootstrap: str, topic: str) -> list[bytes]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        end = (await consumer.end_offsets([tp]))[tp]
        values: list[bytes] = []
        async with asyncio.timeout(30):
            while await consumer.position(tp) < end:
                for batch in (await consumer.getmany(timeout_ms=500)).values():
                    values.extend(record.value or b"" for record in batch)
        return values
    finally:
        await consumer.stop()


async def test_the_cluster_keeps_acknowledged_records_through_the_loss_of_the_leader_and_the_controller(
    kafka_cluster: KafkaCluster, topic_prefix: str
) -> None:
    """Kill the partition's leader, restart it, then kill the active controller: another node is
    elected, every acks=all write made before, between and after is read back, and both nodes
    rejoin the in-sync set on restart."""
    topic = f"{topic_prefix}-replicated"
    await _create(kafka_cluster.bootstrap, topic)
    await asyncio.to_thread(kafka_cluster.wait_in_sync, [topic])
    await _produce(kafka_cluster.bootstrap, topic, [b"before"])

    leader = await asyncio.to_thread(kafka_cluster.partition_leader, topic, 0)
    kafka_cluster.node(leader).kill()
    await _produce(kafka_cluster.bootstrap, topic, [b"after-leader-loss"])
    new_leader = await asyncio.to_thread(kafka_cluster.partition_leader, topic, 0)
    assert new_leader not in (leader, -1)

    # Back before the next loss: two of three voters down would leave no metadata quorum at all.
    await asyncio.to_thread(kafka_cluster.node(leader).start)
    await asyncio.to_thread(kafka_cluster.wait_in_sync, [topic])
    controller = await asyncio.to_thread(kafka_cluster.wait_for_controller)
    kafka_cluster.node(controller).kill()
    elected = await asyncio.to_thread(kafka_cluster.wait_for_controller, other_than=controller)
    assert elected != controller
    await _produce(kafka_cluster.bootstrap, topic, [b"after-controller-loss"])

    await asyncio.to_thread(kafka_cluster.start)
    await asyncio.to_thread(kafka_cluster.wait_in_sync, [topic, "__consumer_offsets"])
    assert await _read_all(kafka_cluster.bootstrap, topic) == [
        b"before",
        b"after-leader-loss",
        b"after-controller-loss",
    ]


def test_sentinel_promotes_the_replica_and_a_lagging_replica_loses_acknowledged_writes(
    redis_sentinel: RedisSentinelGroup, topic_prefix: str
) -> None:
    """The failure a Redis store must be designed for: a write the primary acknowledged, not yet on
    the replica when the primary dies, is gone after Sentinel promotes the replica. `WAIT 1` on the
    write tells the writer that no replica has it."""
    primary = redis_sentinel.primary()
    assert primary is not None
    client = redis.Redis.from_url(primary.url)
    try:
        client.set(f"{topic_prefix}:kept", b"1")
        assert client.wait(1, 5000) == 1  # replicated before anything fails
        replica = redis_sentinel.lag_replica()
        client.set(f"{topic_prefix}:lost", b"1")
        assert client.wait(1, 200) == 0  # acknowledged by the primary alone
    finally:
        client.close()
    primary.kill()
    # Sentinel does not promote a replica it cannot reach: resumed, it still lacks the write.
    replica.resume()
    promoted = redis_sentinel.wait_for_primary(other_than=primary)
    assert promoted is replica
    fresh = redis.Redis.from_url(promoted.url)
    try:
        assert fresh.get(f"{topic_prefix}:kept") == b"1"
        assert fresh.get(f"{topic_prefix}:lost") is None
    finally:
        fresh.close()
    redis_sentinel.bring_back(primary)
    redis_sentinel.wait_in_sync()
