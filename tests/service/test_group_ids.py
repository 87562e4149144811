"""Consumer group ids take the topic prefix: two deployments sharing a broker never share a group."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from planner_harness import make_planner

from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.memory_store import MemoryStore
from rollout_common.topics import ALL
from rollout_executor.executor import Executor
from rollout_executor.ledger import UpgradeLedger
from rollout_executor.metrics import ExecutorMetrics
from rollout_executor.service import ExecutorService
from rollout_executor.settings import ExecutorSettings
from rollout_planner.service.clock import ScaledClock
from rollout_planner.service.settings import PlannerSettings


def test_a_group_is_put_under_the_prefix_once() -> None:
    settings = PlannerSettings(topic_prefix="blue.", http_port=0)
    assert settings.group(settings.planner_group) == "blue.rollout-planner"
    assert settings.group("blue.rollout-planner") == "blue.rollout-planner"
    assert PlannerSettings(http_port=0).group("rollout-planner") == "rollout-planner"


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_planner_and_executors_join_groups_under_the_prefix(kafka_bootstrap: str, topic_prefix: str) -> None:
    prefix = f"{topic_prefix}."
    bus = KafkaBus(kafka_bootstrap, client_id=prefix)
    await bus.ensure_topics([t.spec(prefix) for t in ALL])
    store = MemoryStore()
    # the defaults, rollout-planner and rollout-executors, as a deployment would leave them
    planner = make_planner(
        bus=bus, store=store, prefix=prefix, clock=ScaledClock(origin=time.time()), planner_group="rollout-planner"
    )
    settings = ExecutorSettings(topic_prefix=prefix, metrics_port=0, create_topics=False)
    ledger = UpgradeLedger(store, executor_id="e1", lease_s=30)
    executor = Executor(bus=bus, ledger=ledger, driver=None, metrics=ExecutorMetrics(), executor_id="e1")  # type: ignore[arg-type]
    stop = asyncio.Event()
    tasks = [
        asyncio.create_task(planner.run()),
        asyncio.create_task(ExecutorService(settings, bus=bus, executor=executor).run(stop)),
    ]
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        async with asyncio.timeout(30):
            while True:
                groups = {g[0] for g in await admin.list_consumer_groups() if g[0].startswith(prefix)}
                if len(groups) == 2:
                    break
                await asyncio.sleep(0.2)
        assert groups == {f"{prefix}rollout-planner", f"{prefix}rollout-executors"}
    finally:
        await admin.close()
        planner.stop()
        stop.set()
        await asyncio.gather(*tasks)
        await bus.close()
