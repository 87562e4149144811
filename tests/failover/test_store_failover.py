"""The Redis store through Sentinel, when the primary dies (BUS-3, BUS-6, BUS-8).

Redis replicates asynchronously: a write the primary acknowledged but had not passed on is gone
once Sentinel promotes the replica. A store without `replica_acks` hands out the same claim twice
across such a failover (the duplicate an executor's or a planner's `put_if_absent` would turn into
a second upgrade or a second active planner); with `replica_acks=1` the unconfirmed write raises
TransientError instead, so nothing is acted on that a failover can take back.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from rollout_adapters.redis_store import RedisStore
from rollout_common.errors import TransientError
from rollout_devenv import RedisSentinelGroup

# The stores fixture is built on the session's event loop; its tests must run on that loop too.
pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

_RETRY_S = 30.0


async def _retried(call: Callable[[], Awaitable[object]]) -> object:
    """`call` again on TransientError, as a service's retry loop does, until it succeeds."""
    deadline = time.monotonic() + _RETRY_S
    while True:
        try:
            return await call()
        except TransientError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


@pytest.fixture
async def stores(redis_sentinel: RedisSentinelGroup, topic_prefix: str) -> AsyncIterator[dict[str, RedisStore]]:
    sentinels = [(host, int(port)) for host, port in (a.split(":") for a in redis_sentinel.sentinels)]

    def store(acks: int) -> RedisStore:
        return RedisStore(
            "redis://", namespace=topic_prefix, sentinels=sentinels, sentinel_service="rollout", replica_acks=acks
        )

    made = {"unsafe": store(0), "confirmed": store(1), "later": store(0)}
    yield made
    for each in made.values():
        await each.close()


async def test_a_store_through_sentinel_follows_the_promoted_primary(
    redis_sentinel: RedisSentinelGroup, stores: dict[str, RedisStore]
) -> None:
    store = stores["confirmed"]
    await store.put("before", b"1")
    old, promoted = await asyncio.to_thread(redis_sentinel.kill_primary)
    assert promoted is not old
    # With its only replica promoted, no write is confirmed: writes wait for a replica (the cost of
    # replica_acks=1 with one replica), here the old primary brought back as an orchestrator would.
    with pytest.raises(TransientError, match="0 of 1 replicas confirmed"):
        await store.put("alone", b"0")
    await asyncio.to_thread(redis_sentinel.bring_back, old)
    await _retried(lambda: store.put_many({"after": b"2", "also": b"3"}))
    assert await store.get_many(["before", "after", "also"]) == [b"1", b"2", b"3"]


async def test_an_unconfirmed_claim_is_handed_out_twice_across_a_failover_unless_replicas_confirm_it(
    redis_sentinel: RedisSentinelGroup, stores: dict[str, RedisStore]
) -> None:
    unsafe, confirmed = stores["unsafe"], stores["confirmed"]
    # Both connected before the replica falls behind, so the writes below reach the primary.
    await unsafe.put("warm", b"1")
    replica = await asyncio.to_thread(redis_sentinel.lag_replica)
    assert await unsafe.put_if_absent("claim/unsafe", b"executor-0") is True
    with pytest.raises(TransientError, match="0 of 1 replicas confirmed the write"):
        await confirmed.put_if_absent("claim/confirmed", b"executor-0")
    primary = redis_sentinel.primary()
    assert primary is not None
    primary.kill()
    replica.resume()
    await asyncio.to_thread(redis_sentinel.wait_for_primary, other_than=primary)
    await asyncio.to_thread(redis_sentinel.bring_back, primary)
    await asyncio.to_thread(redis_sentinel.wait_in_sync)

    # The next claimant, after the failover (its own writes unconfirmed: nothing to fail on here).
    later = stores["later"]
    # Unsafe: the first claim, acknowledged, is gone; a second claimant gets it too: a duplicate.
    assert await _retried(lambda: later.put_if_absent("claim/unsafe", b"executor-1")) is True
    # Confirmed: the first claimant was told its claim did not count, so one claim stands.
    assert await _retried(lambda: later.put_if_absent("claim/confirmed", b"executor-1")) is True
    assert await later.get_many(["claim/unsafe", "claim/confirmed"]) == [b"executor-1", b"executor-1"]
