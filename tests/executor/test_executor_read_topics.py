"""At start the executor looks at the topic it reads: a partition count other than the settings' is
one log line that says what to do (issue 21; the planner's side in tests/service)."""

from __future__ import annotations

import asyncio
import logging

import pytest
from executor_kit import CountingDriver, ExecutorFactory
from known_topics import known_topics

from rollout_adapters.kafka_bus import KafkaBus
from rollout_common.ports import TopicSpec
from rollout_common.topics.catalog import DEAD_LETTER, STAGE_ADVANCE, UPGRADE_RESULTS
from rollout_executor.service import ExecutorService
from rollout_executor.settings import ExecutorSettings

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def test_an_executor_reading_a_stage_advance_topic_of_other_partitions_says_what_to_do(
    kafka_bootstrap: str, topic_prefix: str, caplog: pytest.LogCaptureFixture, make_executor: ExecutorFactory
) -> None:
    prefix = f"{topic_prefix}."
    await known_topics(
        kafka_bootstrap,
        [
            TopicSpec(name=prefix + STAGE_ADVANCE.name, partitions=8),
            UPGRADE_RESULTS.spec(prefix),
            DEAD_LETTER.spec(prefix),
        ],
    )
    settings = ExecutorSettings(
        kafka_bootstrap=kafka_bootstrap, topic_prefix=prefix, group_id="executors", metrics_port=0
    )  # type: ignore[call-arg]
    bus = KafkaBus(kafka_bootstrap, client_id="test-executor")
    service = ExecutorService(settings, bus=bus, executor=make_executor(CountingDriver()))
    stop = asyncio.Event()
    with caplog.at_level(logging.ERROR, logger="rollout.topics"):
        running = asyncio.create_task(service.run(stop))
        try:
            async with asyncio.timeout(60):
                while True:  # ready after its first poll: the check ran before it
                    if service.ready:
                        break
                    await asyncio.sleep(0.05)
        finally:
            stop.set()
            await running
            await bus.close()
    assert [r.getMessage() for r in caplog.records if r.name == "rollout.topics"] == [
        f"executor: topic {prefix}{STAGE_ADVANCE.name} has 8 partitions but the settings say 16: grow the topic "
        f"(kafka-topics.sh --alter --topic {prefix}{STAGE_ADVANCE.name} --partitions 16; see docs/operations.md, "
        "sizing) or set ROLLOUT_TOPIC_PARTITIONS to map it to 8 in every service of this deployment"
    ]
