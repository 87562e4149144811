"""Adapters under contract: each test of a port's suite runs once per adapter of that port.

The in-memory adapters always run. The Kafka and Redis ones are marked `integration` and take
the real services from the session fixtures (tests/conftest.py): one broker and one Redis, and the
production topology, a three-node Kafka cluster and Redis with a replica and Sentinels; a missing
service fails those tests, it never skips them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest

from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.memory_bus import MemoryBus
from rollout_adapters.memory_store import MemoryStore
from rollout_adapters.redis_store import RedisStore
from rollout_common.errors import PermanentError
from rollout_common.ports import Bus, Store

# -- the bus ------------------------------------------------------------------------------


@pytest.fixture(
    params=[
        "memory",
        pytest.param("kafka", marks=pytest.mark.integration),
        pytest.param("kafka-cluster", marks=pytest.mark.integration),
    ]
)
def bus_factory(request: pytest.FixtureRequest, topic_prefix: str) -> Callable[[], Bus]:
    """The memory bus, Kafka on the session's broker, or Kafka on the three-node cluster with the
    production settings (replication factor 3, min.insync.replicas 2, so every acks=all write waits
    for a follower); each service looked up only for its variant."""
    if request.param == "memory":
        return MemoryBus
    client_id = f"contract-{topic_prefix}"
    if request.param == "kafka-cluster":
        cluster = request.getfixturevalue("kafka_cluster")
        return lambda: KafkaBus(cluster.bootstrap, client_id=client_id, replication_factor=3, min_insync_replicas=2)
    bootstrap: str = request.getfixturevalue("kafka_bootstrap")
    return lambda: KafkaBus(bootstrap, client_id=client_id)


@pytest.fixture
async def bus(bus_factory: Callable[[], Bus]) -> AsyncIterator[Bus]:
    made = bus_factory()
    yield made
    await made.close()


# -- the store ----------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# A harness holds the store under test, a way to let its TTLs run out, and a way to get a second
# store on the same backend under another namespace.


@dataclass
class MemoryHarness:
    store: MemoryStore
    clock: FakeClock

    async def advance(self, seconds: float) -> None:
        self.clock.now += seconds

    def other_namespace(self) -> Store:
        return MemoryStore(clock=self.clock)


@dataclass
class RedisHarness:
    store: RedisStore
    make: Callable[[str], RedisStore]  # a store on the same server(s) under a namespace
    namespace: str
    extra: list[RedisStore]

    async def advance(self, seconds: float) -> None:
        # Redis keeps its own clock: the only way to let a TTL run out is to wait.
        await asyncio.sleep(seconds)

    def other_namespace(self) -> Store:
        other = self.make(f"{self.namespace}.other")
        self.extra.append(other)
        return other


@pytest.fixture(
    params=[
        "memory",
        pytest.param("redis", marks=pytest.mark.integration),
        pytest.param("redis-sentinel", marks=pytest.mark.integration),
    ]
)
def redis_or_memory(request: pytest.FixtureRequest) -> Callable[[str], RedisStore] | None:
    """None for the memory variant, else how to make a Redis store under a namespace: on the
    session's Redis, or through the Sentinels of a primary and replica with every write confirmed
    by the replica (`replica_acks=1`); each looked up only for its variant."""
    if request.param == "memory":
        return None
    if request.param == "redis-sentinel":
        group = request.getfixturevalue("redis_sentinel")
        sentinels = [(host, int(port)) for host, port in (a.split(":") for a in group.sentinels)]
        return lambda namespace: RedisStore(
            "redis://", namespace=namespace, sentinels=sentinels, sentinel_service=group.service, replica_acks=1
        )
    url: str = request.getfixturevalue("redis_url")
    return lambda namespace: RedisStore(url, namespace=namespace)


@pytest.fixture
async def harness(
    redis_or_memory: Callable[[str], RedisStore] | None, topic_prefix: str
) -> AsyncIterator[MemoryHarness | RedisHarness]:
    if redis_or_memory is None:
        clock = FakeClock()
        yield MemoryHarness(MemoryStore(clock=clock), clock)
        return
    # A namespace per test: tests share one Redis and must not see each other's keys.
    namespace = f"contract.{topic_prefix}"
    made = RedisHarness(redis_or_memory(namespace), redis_or_memory, namespace, [])
    yield made
    for store in [made.store, *made.extra]:
        # Leave the shared Redis as it was; a store a test closed on purpose has nothing to clean.
        with contextlib.suppress(PermanentError):
            for key in await store.keys(""):
                await store.delete(key)
        await store.close()
