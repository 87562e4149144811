"""The planner's consumer lets the broker hold a fetch of partitions with nothing new for 100 ms,
not aiokafka's 500. aiokafka keeps one fetch a broker in flight, so a partition whose fetched
records were all taken waits for that fetch before it is asked for again: a planner catching up
on readiness beside its idle operator and inventory topics waited so for a fifth of its run
(docs/benchmarks.md). How long a refill waits is a benchmark's figure; what is tested here is that
the planner's bound reaches the client, that other consumers keep aiokafka's (ten empty fetches a
second cost an idle consumer about 0.6% of a core more), and that a nonsense bound is refused."""

from __future__ import annotations

import pytest

from rollout_adapters.kafka_bus import ConsumerOptions, KafkaBus
from rollout_common.errors import InvalidInputError
from rollout_common.ports import TopicSpec
from rollout_planner.service.runtime import consumer_options
from rollout_planner.service.settings import PlannerSettings


async def _fetch_wait_of_a_consumer(bus: KafkaBus, prefix: str) -> int:
    """The fetch wait aiokafka was given for a consumer the bus made, once it read a record."""
    busy, idle = f"{prefix}.busy", f"{prefix}.idle"
    await bus.ensure_topics([TopicSpec(name=busy), TopicSpec(name=idle)])
    await bus.publish(busy, key=b"k", value=b"v")
    consumer = bus.consumer([busy, idle], group=f"{prefix}.fetch-wait")
    records: list[object] = []
    for _ in range(30):  # the group join takes a few polls
        records += await consumer.poll(max_records=10, timeout_s=1.0)
        if records:
            break
    assert len(records) == 1
    client = consumer._consumer  # type: ignore[attr-defined]
    return int(client._fetcher._fetch_max_wait_ms)


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_the_planners_consumer_asks_the_broker_to_hold_an_idle_fetch_at_most_100_ms(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    bus = KafkaBus(kafka_bootstrap, client_id="fetch-wait", consumer_options=consumer_options(PlannerSettings()))
    try:
        assert await _fetch_wait_of_a_consumer(bus, f"{topic_prefix}.planner") == 100
    finally:
        await bus.close()


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_other_consumers_keep_aiokafkas_fetch_wait(kafka_bootstrap: str, topic_prefix: str) -> None:
    bus = KafkaBus(kafka_bootstrap, client_id="fetch-wait-default")
    try:
        assert await _fetch_wait_of_a_consumer(bus, f"{topic_prefix}.other") == 500
    finally:
        await bus.close()


def test_the_planners_fetch_wait_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROLLOUT_KAFKA_FETCH_MAX_WAIT_MS", "250")
    assert consumer_options(PlannerSettings()).fetch_max_wait_ms == 250
    monkeypatch.setenv("ROLLOUT_KAFKA_FETCH_MAX_WAIT_MS", "0")  # an idle planner would fetch without pause
    with pytest.raises(ValueError, match="kafka_fetch_max_wait_ms"):
        PlannerSettings()
    monkeypatch.setenv("ROLLOUT_KAFKA_FETCH_MAX_WAIT_MS", "60000")  # every idle fetch would time out
    with pytest.raises(ValueError, match="kafka_fetch_max_wait_ms"):
        PlannerSettings()


def test_a_negative_fetch_wait_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="fetch_max_wait_ms"):
        ConsumerOptions(fetch_max_wait_ms=-1)


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_a_consumer_reads_the_topics_metadata_again_every_10_s(kafka_bootstrap: str, topic_prefix: str) -> None:
    """A group whose leader joined while the broker restarted is assigned nothing (no topic listed
    yet) and rebalances only when its metadata is read again: within 10 s, not aiokafka's 5 minutes."""
    bus = KafkaBus(kafka_bootstrap, client_id="metadata-age")
    try:
        await _fetch_wait_of_a_consumer(bus, f"{topic_prefix}.metadata")
        client = bus._consumers.copy().pop()._consumer  # type: ignore[attr-defined]
        assert client._client._metadata_max_age_ms == 10_000
    finally:
        await bus.close()


def test_a_metadata_age_below_1_ms_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="metadata_max_age_ms"):
        ConsumerOptions(metadata_max_age_ms=0)
