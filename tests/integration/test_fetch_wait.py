"""The consumers a `KafkaBus` makes let the broker hold a fetch of partitions with nothing new for
100 ms, not aiokafka's 500: aiokafka keeps one fetch per broker in flight, so a partition whose
fetched records were all taken waits for that fetch before it is asked for again, and a planner
catching up on readiness beside its idle operator and inventory topics waited so for a fifth of
its run (docs/benchmarks.md). How long a refill waits is a benchmark's figure; what is tested here
is that the bound reaches the client, and that a nonsense bound is refused."""

from __future__ import annotations

import pytest

from rollout_adapters.kafka_bus import ConsumerOptions, KafkaBus
from rollout_common.errors import InvalidInputError
from rollout_common.ports import TopicSpec


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_a_bus_consumer_asks_the_broker_to_hold_an_idle_fetch_at_most_100_ms(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    bus = KafkaBus(kafka_bootstrap, client_id="fetch-wait")
    busy, idle = f"{topic_prefix}.busy", f"{topic_prefix}.idle"
    try:
        await bus.ensure_topics([TopicSpec(name=busy), TopicSpec(name=idle)])
        await bus.publish(busy, key=b"k", value=b"v")
        consumer = bus.consumer([busy, idle], group=f"{topic_prefix}.fetch-wait")
        records: list[object] = []
        for _ in range(30):  # the group join takes a few polls
            records += await consumer.poll(max_records=10, timeout_s=1.0)
            if records:
                break
        assert len(records) == 1
        client = consumer._consumer  # type: ignore[attr-defined]
        assert client._fetcher._fetch_max_wait_ms == 100
    finally:
        await bus.close()


def test_a_negative_fetch_wait_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="fetch_max_wait_ms"):
        ConsumerOptions(fetch_max_wait_ms=-1)
