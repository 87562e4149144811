"""OPS-4 through the executor, on the real Redis and Kafka: a retried upgrade runs once more despite its
recorded failure, exactly once per retry; a redelivered command (retry or not) upgrades nothing twice."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from executor_kit import CountingDriver, stage_advance

from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.redis_store import RedisStore
from rollout_common.topics.catalog import DEAD_LETTER, STAGE_ADVANCE, UPGRADE_RESULTS
from rollout_executor.executor import Executor
from rollout_executor.ledger import UpgradeLedger
from rollout_executor.metrics import ExecutorMetrics

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


@pytest.fixture
async def redis_store(redis_url: str, topic_prefix: str) -> AsyncIterator[RedisStore]:
    store = RedisStore(redis_url, namespace=topic_prefix)
    yield store
    await store.close()


@pytest.fixture
async def kafka_bus(kafka_bootstrap: str, topic_prefix: str) -> AsyncIterator[KafkaBus]:
    bus = KafkaBus(kafka_bootstrap, client_id=topic_prefix)
    await bus.ensure_topics([t.spec(f"{topic_prefix}.") for t in (STAGE_ADVANCE, UPGRADE_RESULTS, DEAD_LETTER)])
    yield bus
    await bus.close()


def _executor(bus: KafkaBus, store: RedisStore, driver: CountingDriver, prefix: str) -> Executor:
    ledger = UpgradeLedger(store, executor_id="e1", lease_s=30)
    return Executor(
        bus=bus, ledger=ledger, driver=driver, metrics=ExecutorMetrics(), executor_id="e1", topic_prefix=f"{prefix}."
    )


async def test_ops4_a_retried_failure_runs_once_per_retry_and_never_on_redelivery(
    kafka_bus: KafkaBus, redis_store: RedisStore, topic_prefix: str
) -> None:
    driver = CountingDriver(failing=frozenset({"c1"}))
    executor = _executor(kafka_bus, redis_store, driver, topic_prefix)
    first = stage_advance("cmd-1", ("c1", "c2"))
    await executor.handle_command(first)
    await executor.handle_command(first)  # redelivered: the recorded results answer
    assert dict(driver.calls) == {"c1": 1, "c2": 1}

    driver.failing = frozenset()
    retried = first.model_copy(update={"command_id": "cmd-2", "clusters": ("c1",), "retries": {"c1": 1}})
    await executor.handle_command(retried)
    await executor.handle_command(retried)  # the retry redelivered: runs no second time
    assert dict(driver.calls) == {"c1": 2, "c2": 1}

    again = retried.model_copy(update={"command_id": "cmd-3", "retries": {"c1": 2}})
    await executor.handle_command(again)
    assert dict(driver.calls) == {"c1": 3, "c2": 1}
    assert sorted(await redis_store.keys("executor:result:")) == [
        "executor:result:controlPlane:1.31.2:c1",
        "executor:result:controlPlane:1.31.2:c1:retry-1",
        "executor:result:controlPlane:1.31.2:c1:retry-2",
        "executor:result:controlPlane:1.31.2:c2",
    ]


async def test_ops4_a_retry_count_for_another_cluster_changes_nothing_for_this_one(
    kafka_bus: KafkaBus, redis_store: RedisStore, topic_prefix: str
) -> None:
    driver = CountingDriver(failing=frozenset({"c1", "c2"}))
    executor = _executor(kafka_bus, redis_store, driver, topic_prefix)
    await executor.handle_command(stage_advance("cmd-1", ("c1", "c2")))
    retry_c1 = stage_advance("cmd-2", ("c1", "c2")).model_copy(update={"retries": {"c1": 1}})
    await executor.handle_command(retry_c1)
    assert dict(driver.calls) == {"c1": 2, "c2": 1}
