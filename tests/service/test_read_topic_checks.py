"""At start the planner and the executor look at the topics they read: a partition count other than
the settings', or a replication below them, is one log line that says what to do (issue 21). The
executor's check is in tests/executor/test_executor_read_topics.py."""

from __future__ import annotations

import logging

import pytest
from known_topics import known_topics
from planner_harness import START, make_planner

from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.memory_store import MemoryStore
from rollout_common.ports import TopicSpec
from rollout_planner.service.clock import ManualClock
from rollout_planner.service.intake import INPUT_TOPICS

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

READINESS_NAME = "rollout.cluster-readiness"


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "rollout.topics"]


async def _planner_lines(
    bootstrap: str, prefix: str, caplog: pytest.LogCaptureFixture, *, replication: int = 1, **settings: object
) -> list[str]:
    # the bus a planner builds from its settings (ROLLOUT_KAFKA_REPLICATION_FACTOR) holds the factor
    bus = KafkaBus(bootstrap, client_id="test-planner", replication_factor=replication)
    planner = make_planner(bus=bus, store=MemoryStore(), prefix=prefix, clock=ManualClock(START), **settings)
    try:
        with caplog.at_level(logging.ERROR, logger="rollout.topics"):
            assert await planner.start()
    finally:
        await planner.close()
        await bus.close()
    return _lines(caplog)


async def test_a_planner_reading_a_topic_with_more_partitions_than_its_settings_says_to_map_it(
    kafka_bootstrap: str, topic_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    prefix = f"{topic_prefix}."
    await known_topics(kafka_bootstrap, [TopicSpec(name=prefix + READINESS_NAME, partitions=6)])
    assert await _planner_lines(kafka_bootstrap, prefix, caplog) == [
        f"planner: topic {prefix}{READINESS_NAME} has 6 partitions but the settings say 4: set "
        "ROLLOUT_TOPIC_PARTITIONS to map it to 6 in every service of this deployment"
    ]


async def test_a_planner_reading_a_topic_with_fewer_partitions_than_its_settings_says_to_grow_it(
    kafka_bootstrap: str, topic_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    prefix = f"{topic_prefix}."
    await known_topics(kafka_bootstrap, [TopicSpec(name=prefix + READINESS_NAME, partitions=4)])
    lines = await _planner_lines(kafka_bootstrap, prefix, caplog, topic_partitions={READINESS_NAME: 8})
    assert lines == [
        f"planner: topic {prefix}{READINESS_NAME} has 4 partitions but the settings say 8: grow the topic "
        f"(kafka-topics.sh --alter --topic {prefix}{READINESS_NAME} --partitions 8; see docs/operations.md, "
        "sizing) or set ROLLOUT_TOPIC_PARTITIONS to map it to 4 in every service of this deployment"
    ]


async def test_a_planner_whose_topics_agree_with_its_settings_says_nothing(
    kafka_bootstrap: str, topic_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert await _planner_lines(kafka_bootstrap, f"{topic_prefix}.", caplog) == []


async def test_a_planner_reading_topics_replicated_below_its_settings_says_how_to_raise_it(
    kafka_bootstrap: str, topic_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The one-broker test cluster holds one replica; settings asking for 2 cannot create topics, so
    the topics exist already (made with 1) and the planner only reads them."""
    prefix = f"{topic_prefix}."
    await known_topics(kafka_bootstrap, [t.spec(prefix) for t in INPUT_TOPICS])
    lines = await _planner_lines(kafka_bootstrap, prefix, caplog, replication=2, create_topics=False)
    assert lines == [
        f"planner: topic {prefix}{topic.name}: 1 replicas is below the settings' replication: raise it with "
        "kafka-reassign-partitions.sh (and kafka-configs.sh for min.insync.replicas) or lower "
        "ROLLOUT_KAFKA_REPLICATION_FACTOR to what the cluster has"
        for topic in INPUT_TOPICS
    ]
