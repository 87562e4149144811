"""The small fleet several Kafka tests run a planner on: canary (can-1), then prod (prod-1), each
stage soaking a day; and that planner, in this process on the real broker and Redis. Shared by
every test folder (tests/ is on the path)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import redis.asyncio as aioredis

from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.redis_store import RedisStore
from rollout_common.fleet import Cluster
from rollout_common.sequence import Sequence
from rollout_planner.engine import EngineState, new_state
from rollout_planner.engine import decide as engine_decide
from rollout_planner.service.clock import ManualClock
from rollout_planner.service.planner import Planner
from rollout_planner.service.quarantine import Decide
from rollout_planner.service.settings import PlannerSettings

START = 1_767_225_600.0  # 2026-01-01T00:00:00Z, the planner's (manual) clock

OLD = "1.30.5-gke.1000"
NEW = "1.31.13-gke.1023000"


def canary_prod_sequence(name: str) -> Sequence:
    return Sequence.model_validate(
        {
            "name": name,
            "channel": "regular",
            "stages": [
                {"name": "canary", "clusterSelector": {"matchLabels": {"env": "canary"}}, "soak": "1d"},
                {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}, "soak": "1d"},
            ],
        }
    )


def canary_prod_fleet() -> list[Cluster]:
    return [
        Cluster(name=name, labels={"env": env}, version=OLD) for name, env in (("can-1", "canary"), ("prod-1", "prod"))
    ]


def canary_prod_state(name: str) -> EngineState:
    """The planner's first state for this fleet, under sequence `name`."""
    return new_state(canary_prod_sequence(name), canary_prod_fleet())


def canary_prod_planner(
    bus: KafkaBus, store: RedisStore, prefix: str, *, name: str, decide: Decide = engine_decide
) -> Planner:
    """A planner starting from `canary_prod_state(name)` (unless `store` holds a state already),
    its clock stopped at START, its topics and consumer group under `prefix`."""
    settings = PlannerSettings(
        topic_prefix=prefix, planner_group=f"{prefix}planner", poll_timeout_s=0.2, http_port=0, retry_backoff_s=0.05
    )

    async def initial() -> EngineState:
        return canary_prod_state(name)

    return Planner(
        bus=bus, store=store, settings=settings, clock=ManualClock(START), initial_state=initial, decide=decide
    )


@contextlib.asynccontextmanager
async def running_canary_prod_planner(
    bootstrap: str, redis_url: str, prefix: str, *, name: str, decide: Decide = engine_decide, forget: bool = True
) -> AsyncIterator[Planner]:
    """`canary_prod_planner` running for the block, with a bus and a store of its own, as a process
    would have; it must still run when the block ends. Then it is stopped and, with `forget`, its
    keys are deleted from Redis."""
    bus = KafkaBus(bootstrap, client_id=f"{prefix}planner")
    store = RedisStore(redis_url, namespace=prefix)
    planner = canary_prod_planner(bus, store, prefix, name=name, decide=decide)
    task = asyncio.create_task(planner.run())
    try:
        yield planner
        assert not task.done(), "the planner stopped"
    finally:
        planner.stop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 30)
        await bus.close()
        await store.close()
        if forget:
            await forget_namespace(redis_url, prefix)


async def forget_namespace(redis_url: str, prefix: str) -> None:
    """Delete every key a store under namespace `prefix` wrote."""
    client = aioredis.Redis.from_url(redis_url)
    try:
        async for key in client.scan_iter(match=f"{prefix}:*"):
            await client.delete(key)
    finally:
        await client.aclose()
