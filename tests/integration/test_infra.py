"""The test infrastructure itself: a real broker and a real Redis answer as the adapters expect."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Sequence
from pathlib import Path

import pytest
import redis
import redis.asyncio
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from rollout_devenv import DevenvError, KafkaBroker, RedisServer
from rollout_devenv._proc import LOOPBACK, threads_stopped

pytestmark = pytest.mark.integration

_CONSUME_TIMEOUT_S = 30.0


async def _create_topic(bootstrap: str, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        await admin.start()
        await admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    finally:
        await admin.close()


async def _produce(bootstrap: str, topic: str, values: Sequence[bytes]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    try:
        await producer.start()
        for value in values:
            await producer.send_and_wait(topic, value, key=b"k")
    finally:
        await producer.stop()


def _group_consumer(bootstrap: str, *, topic: str, group: str) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )


async def _consume(consumer: AIOKafkaConsumer, count: int) -> list[ConsumerRecord[bytes, bytes]]:
    records: list[ConsumerRecord[bytes, bytes]] = []
    async with asyncio.timeout(_CONSUME_TIMEOUT_S):
        while len(records) < count:
            batches = await consumer.getmany(timeout_ms=500, max_records=count - len(records))
            for batch in batches.values():
                records.extend(batch)
    return records


async def test_kafka_round_trip_with_manual_commit(kafka_bootstrap: str, topic_prefix: str) -> None:
    topic = f"{topic_prefix}-events"
    await _create_topic(kafka_bootstrap, topic)
    await _produce(kafka_bootstrap, topic, [b"one", b"two", b"three"])

    consumer = _group_consumer(kafka_bootstrap, topic=topic, group=f"{topic_prefix}-group")
    try:
        await consumer.start()
        records = await _consume(consumer, 3)
        await consumer.commit()
        committed = await consumer.committed(TopicPartition(topic, 0))
    finally:
        await consumer.stop()

    assert [record.value for record in records] == [b"one", b"two", b"three"]
    assert committed == 3


async def test_redis_ping_set_get(redis_url: str, topic_prefix: str) -> None:
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        assert await client.ping()
        await client.set(f"{topic_prefix}:key", b"value", ex=60)
        assert await client.get(f"{topic_prefix}:key") == b"value"
    finally:
        await client.aclose()


async def test_broker_restart_keeps_messages_and_committed_offsets(
    kafka_broker: KafkaBroker, topic_prefix: str
) -> None:
    bootstrap = kafka_broker.bootstrap
    topic, group = f"{topic_prefix}-events", f"{topic_prefix}-group"
    await _create_topic(bootstrap, topic)
    await _produce(bootstrap, topic, [b"before-1", b"before-2"])
    consumer = _group_consumer(bootstrap, topic=topic, group=group)
    try:
        await consumer.start()
        first = await _consume(consumer, 1)
        await consumer.commit({TopicPartition(topic, 0): first[0].offset + 1})
    finally:
        await consumer.stop()

    # Off the event loop: a restart blocks for seconds while the broker stops and comes back.
    await asyncio.to_thread(kafka_broker.restart)
    assert kafka_broker.bootstrap == bootstrap

    # The group resumes after its commit: the second message, written before the restart.
    consumer = _group_consumer(bootstrap, topic=topic, group=group)
    try:
        await consumer.start()
        resumed = await _consume(consumer, 1)
    finally:
        await consumer.stop()
    # A new group still reads everything from the start.
    fresh = _group_consumer(bootstrap, topic=topic, group=f"{group}-fresh")
    try:
        await fresh.start()
        everything = await _consume(fresh, 2)
    finally:
        await fresh.stop()

    assert [record.value for record in first] == [b"before-1"]
    assert [record.value for record in resumed] == [b"before-2"]
    assert [record.value for record in everything] == [b"before-1", b"before-2"]


def test_redis_with_aof_keeps_data_across_restart(tmp_path: Path, topic_prefix: str) -> None:
    with RedisServer(data_dir=tmp_path, aof=True) as server:
        with redis.Redis.from_url(server.url) as client:
            client.set(f"{topic_prefix}:key", b"kept")
        url = server.url
        server.restart()
        assert server.url == url
        with redis.Redis.from_url(server.url) as client:
            assert client.get(f"{topic_prefix}:key") == b"kept"


def test_a_server_whose_given_port_is_taken_fails_with_its_exit_and_leaves_nothing_running(tmp_path: Path) -> None:
    """The start every local server shares: a port it was given is not swapped for another (its
    clients hold that address), the error names the child's exit and carries its log's tail, and
    no process is left behind."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind((LOOPBACK, 0))
        holder.listen()
        port = int(holder.getsockname()[1])
        server = RedisServer(data_dir=tmp_path, port=port)
        with pytest.raises(DevenvError) as raised:
            server.start()
    assert raised.value.message == f"redis-server did not start: it exited with code 1; see {server.log_path}"
    assert "Address already in use" in raised.value.detail
    assert not server.running
    assert server.port == port


def test_a_paused_server_has_stopped_every_thread_when_pause_returns(tmp_path: Path) -> None:
    """`pause` returns only once the process has stopped: a SIGSTOP is taken by the target's
    threads when they next run, and a test that asks a paused server right away must meet a
    process that answers nothing (a loaded machine let a frozen Prometheus answer once)."""
    with RedisServer(data_dir=tmp_path) as server:
        assert server.pid is not None
        assert not threads_stopped(server.pid)
        server.pause()
        assert threads_stopped(server.pid)
        with socket.create_connection((LOOPBACK, server.port), timeout=5) as conn:
            conn.settimeout(0.5)
            conn.sendall(b"PING\r\n")
            with pytest.raises(TimeoutError):
                conn.recv(16)
            server.resume()
            conn.settimeout(10)
            assert conn.recv(16) == b"+PONG\r\n"
        assert not threads_stopped(server.pid)
