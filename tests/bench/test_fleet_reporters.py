"""The sustained run's reporters: a heartbeat from the template is the envelope encoder's, byte for
byte, and a batch's heartbeats land at the offsets the sender reports, on their key's partition."""

from __future__ import annotations

import asyncio
import random
import sys
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.fleet_reporters import BatchedSender, heartbeat_record  # noqa: E402
from bench.soak_health import cluster_name  # noqa: E402
from rollout_adapters.kafka_bus import KafkaBus  # noqa: E402
from rollout_adapters.memory_bus import kafka_partition  # noqa: E402
from rollout_common import envelope  # noqa: E402
from rollout_common.heartbeat import Heartbeat  # noqa: E402
from rollout_common.topics.catalog import HEARTBEATS  # noqa: E402


@pytest.mark.parametrize("seed", range(5))
def test_a_heartbeat_from_the_template_is_what_the_envelope_encoder_writes(seed: int) -> None:
    rng = random.Random(seed)
    for number in range(400):
        at = rng.choice([rng.uniform(0, 4e9), float(rng.randrange(2_000_000_000)), round(rng.uniform(1e9, 2e9), 3)])
        ready = rng.random() < 0.5
        name = cluster_name(rng.randrange(1_000_000))
        key, value, headers = heartbeat_record(name, ready=ready, event_id=f"soak-{number}", at=at, source="soak")
        model = Heartbeat(cluster=name, ready=ready, observed_at=at, reporter="soak")
        expected_value, expected_headers = envelope.encode(model, event_id=f"soak-{number}", source="soak", at=at)
        assert (key, value, headers) == (name.encode(), expected_value, list(expected_headers.items()))
        assert envelope.decode(value, dict(headers), HEARTBEATS.models)[1] == model


@pytest.mark.integration
def test_each_heartbeat_is_at_the_offset_reported_on_its_keys_partition(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    asyncio.run(_sent_and_read_back(kafka_bootstrap, topic_prefix))


async def _sent_and_read_back(bootstrap: str, prefix: str) -> None:
    topic = prefix + HEARTBEATS.name
    bus = KafkaBus(bootstrap, client_id="test-reporters")
    try:
        await bus.ensure_topics([HEARTBEATS.spec(prefix, partitions=4)])
    finally:
        await bus.close()
    reported: dict[tuple[int, int], float] = {}

    def sent(partition: int, offset: int, at: float) -> None:
        reported[(partition, offset)] = at

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, max_batch_size=16 * 1024)  # several batches a partition
    await producer.start()
    expected: dict[float, tuple[int, bytes, bytes]] = {}
    try:
        sender = BatchedSender(producer, topic, sent=sent)
        for number in range(600):
            name, at = cluster_name(number % 150), 1_700_000_000.0 + number
            key, value, headers = heartbeat_record(name, ready=True, event_id=f"e-{number}", at=at, source="soak")
            partition = kafka_partition(key, 4)
            expected[at] = (partition, key, value)
            await sender.add(key, value, headers, partition=partition, at=at)
            if number % 100 == 99:
                await sender.flush()
        await sender.settled()
    finally:
        await producer.stop()
    assert sorted(reported.values()) == sorted(expected)

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(4)])
        read: dict[tuple[int, int], tuple[bytes, bytes]] = {}
        async with asyncio.timeout(30):
            while len(read) < len(expected):
                for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                    read.update({(tp.partition, r.offset): (r.key, r.value) for r in records})
    finally:
        await consumer.stop()
    for place, at in reported.items():
        partition, key, value = expected[at]
        assert place[0] == partition
        assert read[place] == (key, value)
