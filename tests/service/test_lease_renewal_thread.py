"""BUS-8 with a planner whose loop is busy: the lease is renewed from a thread of its own.

A live planner of a large fleet can hold its event loop for longer than the lease's TTL (loading
or writing 100,000 clusters' state on a loaded machine). Renewed only from the loop, it lost its
lease at each such step, went back to standby, reloaded, and lost it again: the load test's
planner made no progress for 40 s. These tests block the loop on purpose, on the real Redis.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from rollout_adapters.redis_store import RedisStore
from rollout_planner.service.leadership import LeaseLostError, LeaseState
from rollout_planner.service.lease_keeper import LEASE_KEY, PlannerLease

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

TTL_S = 1.5


@pytest.fixture
async def store(redis_url: str, topic_prefix: str) -> AsyncIterator[RedisStore]:
    """The planner's store; closed after the test has let its lease go."""
    store = RedisStore(redis_url, namespace=topic_prefix)
    try:
        yield store
    finally:
        await store.close()


def _lease(store: RedisStore, *, redis_url: str, namespace: str, owner: str, max_stall_s: float) -> PlannerLease:
    """The planner's lease on `store`, renewed by its thread through a store of its own."""
    return PlannerLease(
        store,
        ttl_s=TTL_S,
        retry_s=0.1,
        owner=owner,
        renewal_store=lambda: RedisStore(redis_url, namespace=namespace),
        max_stall_s=max_stall_s,
    )


async def _take_and_renew(lease: PlannerLease) -> None:
    assert await lease.wait_until_held(stopping=_never())
    lease.start_renewing()


async def test_bus_8_a_planner_whose_loop_is_busy_longer_than_the_ttl_keeps_its_lease(
    store: RedisStore, redis_url: str, topic_prefix: str
) -> None:
    lease = _lease(store, redis_url=redis_url, namespace=topic_prefix, owner="busy", max_stall_s=30.0)
    try:
        await _take_and_renew(lease)
        time.sleep(TTL_S * 3)  # noqa: ASYNC251 - on purpose: one long step holding the loop
        lease.check()  # still ours: the thread renewed it
        assert lease.state is LeaseState.ACTIVE
        assert await store.get(LEASE_KEY) == b"1/busy"
    finally:
        await lease.release()
    assert await _gone(redis_url, topic_prefix)


async def test_bus_8_a_loop_stalled_past_the_bound_lets_the_lease_expire(
    store: RedisStore, redis_url: str, topic_prefix: str
) -> None:
    lease = _lease(store, redis_url=redis_url, namespace=topic_prefix, owner="hung", max_stall_s=TTL_S / 3)
    try:
        await _take_and_renew(lease)
        time.sleep(TTL_S * 3)  # noqa: ASYNC251 - on purpose: a hung loop; the thread stops renewing
        with pytest.raises(LeaseLostError, match="not renewed within"):
            lease.check()
        assert await store.get(LEASE_KEY) is None  # expired in the store: a standby may take it
    finally:
        await lease.stop_renewing()


def _never() -> asyncio.Event:
    return asyncio.Event()


async def _gone(redis_url: str, namespace: str) -> bool:
    store = RedisStore(redis_url, namespace=namespace)
    try:
        return await store.get(LEASE_KEY) is None
    finally:
        await store.close()
