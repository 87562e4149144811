"""Reading and writing Kafka topics the way an outside user would: plain aiokafka and the documented
partition counts, no project code on the wire."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition

from rollout_common.topics import ALL

Message = ConsumerRecord[bytes, bytes]


async def read_topic(
    bootstrap: str, topic: str, *, until: Callable[[list[Message]], bool], timeout_s: float = 30.0
) -> list[Message]:
    """Every record of the topic from the beginning, read until `until(records)` holds."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        records: list[Message] = []
        async with asyncio.timeout(timeout_s):
            partitions = [TopicPartition(topic, p) for p in range(_partition_count(topic))]
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)
            while not until(records):
                for batch in (await consumer.getmany(timeout_ms=200)).values():
                    records.extend(batch)
        return records
    finally:
        await consumer.stop()


def _partition_count(topic: str) -> int:
    """From the catalog: a freshly created topic may be missing from a new client's metadata."""
    return next(t.partitions for t in ALL if topic.endswith(t.name))


async def produce(bootstrap: str, topic: str, *, key: bytes, value: bytes, headers: list[tuple[str, bytes]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        await producer.send_and_wait(topic, value, key=key, headers=headers)
    finally:
        await producer.stop()


def bodies(records: list[Message]) -> list[dict[str, Any]]:
    return [json.loads(r.value) for r in records if r.value]


def header(record: Message, name: str) -> bytes | None:
    return next((v for k, v in record.headers if k == name), None)
