"""Reading and writing Kafka topics the way an outside user would: plain aiokafka and the documented
partition counts, no project code on the wire. Shared by every test folder (tests/ is on the path)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from rollout_common.topics import ALL

Message = ConsumerRecord[bytes, bytes]


async def read_topic(
    bootstrap: str,
    topic: str,
    *,
    until: Callable[[list[Message]], bool],
    timeout_s: float = 30.0,
    partitions: int | None = None,
    on_poll: Callable[[list[Message]], None] | None = None,
    client: Mapping[str, Any] | None = None,
) -> list[Message]:
    """Every record of the topic from the beginning, read until `until(records)` holds.

    `partitions`: how many the topic has (default: the catalog's count for its name);
    `on_poll(records)` runs after every fetch (to fail early when a process died); `client`:
    more aiokafka consumer settings (a login, a larger fetch size). The timeout covers the seek
    too: a consumer that may not see the topic waits for its metadata until then, not for ever.
    """
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, **(client or {}))
    await consumer.start()
    try:
        records: list[Message] = []
        async with asyncio.timeout(timeout_s):
            count = partitions if partitions is not None else _partition_count(topic)
            assigned = [TopicPartition(topic, p) for p in range(count)]
            consumer.assign(assigned)
            await consumer.seek_to_beginning(*assigned)
            while not until(records):
                for batch in (await consumer.getmany(timeout_ms=200)).values():
                    records.extend(batch)
                if on_poll is not None:
                    on_poll(records)
        return records
    finally:
        await consumer.stop()


async def read_to_end(
    bootstrap: str, topic: str, *, partitions: int | None = None, timeout_s: float = 30.0
) -> list[Message]:
    """Every record on the topic now: read from the beginning up to each partition's end offset as
    it was when the read started (for "nothing of X was published", after the publishers settled)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        records: list[Message] = []
        async with asyncio.timeout(timeout_s):
            count = partitions if partitions is not None else _partition_count(topic)
            assigned = [TopicPartition(topic, p) for p in range(count)]
            consumer.assign(assigned)
            # seek first: asked for the end offsets before the seek, aiokafka 0.14's consumer
            # fetched nothing in the planner-standby test (30 s, every partition behind)
            await consumer.seek_to_beginning(*assigned)
            ends = await consumer.end_offsets(assigned)
            behind = {tp: end for tp, end in ends.items() if end > 0}
            while behind:
                for tp, batch in (await consumer.getmany(timeout_ms=200)).items():
                    records.extend(batch)
                    if batch and batch[-1].offset + 1 >= behind.get(tp, 0):
                        behind.pop(tp, None)
        return records
    finally:
        await consumer.stop()


async def caught_up(bootstrap: str, group: str, topics: Sequence[str], *, timeout_s: float = 120.0) -> None:
    """Wait until `group` has committed every record now on `topics` (lag 0 on each partition).

    The services commit a record only once what they do about it is published, so afterwards a
    test reading their output sees every answer, a wrongly repeated one included: the condition a
    fixed "room for a repeat to show up" wait stood for. The bound is generous, for a loaded machine.
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await admin.start()
    await consumer.start()
    behind: dict[TopicPartition, int] = {}
    try:
        partitions = [TopicPartition(t, p) for t in topics for p in range(_partition_count(t))]
        async with asyncio.timeout(timeout_s):
            while True:
                committed = await admin.list_consumer_group_offsets(group)
                ends = await consumer.end_offsets(partitions)
                behind = {}
                for tp, end in ends.items():
                    meta = committed.get(tp)
                    done = meta.offset if meta is not None and meta.offset >= 0 else 0
                    if end > done:
                        behind[tp] = end - done
                if not behind:
                    return
                await asyncio.sleep(0.2)
    except TimeoutError:
        raise AssertionError(f"group {group} still behind after {timeout_s:g} s: {behind}") from None
    finally:
        await consumer.stop()
        await admin.close()


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


def completions(records: Sequence[Message]) -> dict[tuple[str, str], str]:
    """(stage, track) -> version of every stage transition to COMPLETE among progress records."""
    found = {}
    for record in records:
        body = json.loads(record.value)
        if body["kind"] == "stage_transition" and body["state"] == "COMPLETE":
            found[(body["stage"], body["track"])] = body["version"]
    return found
