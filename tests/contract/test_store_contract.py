"""The Store contract: what the shell may rely on, whichever store it holds.

Every test runs against MemoryStore and against RedisStore on a real Redis (see conftest.py).
"""

from __future__ import annotations

import asyncio
from typing import Protocol

import pytest

from rollout_adapters.redis_store import RedisStore
from rollout_common.errors import InvalidInputError, PermanentError, TransientError
from rollout_common.ports import Store, token_epoch

# The harness fixture is built on the session's event loop; its tests must run on that loop too.
pytestmark = pytest.mark.asyncio(loop_scope="session")


class StoreHarness(Protocol):
    """What the `harness` fixture gives, whichever backend it stands on."""

    store: Store

    async def advance(self, seconds: float) -> None:
        """Let `seconds` pass for the store's TTLs."""

    def other_namespace(self) -> Store:
        """A second store on the same backend, under another namespace."""


async def test_a_missing_key_reads_as_none(harness: StoreHarness) -> None:
    assert await harness.store.get("nothing/here") is None
    assert await harness.store.get_many([]) == []


async def test_put_then_get_and_overwrite(harness: StoreHarness) -> None:
    store = harness.store
    await store.put("rollout/r1", b"v1")
    await store.put("rollout/r1", b"v2")
    await store.put("binary", b"\x00\xff")
    assert await store.get("rollout/r1") == b"v2"
    assert await store.get_many(["binary", "missing", "rollout/r1"]) == [b"\x00\xff", None, b"v2"]


async def test_put_many_writes_every_item(harness: StoreHarness) -> None:
    items = {f"cluster/{n:03d}": b"%d" % n for n in range(50)}
    await harness.store.put_many(items)
    await harness.store.put_many({})
    assert await harness.store.get_many(list(items)) == list(items.values())


async def test_a_reader_never_sees_half_of_a_put_many(harness: StoreHarness) -> None:
    store = harness.store
    keys = [f"wave/{n:03d}" for n in range(200)]
    await store.put_many(dict.fromkeys(keys, b"0"))
    mixed: list[set[bytes | None]] = []

    async def read_while_writing() -> None:
        for _ in range(50):
            seen = set(await store.get_many(keys))
            if len(seen) > 1:
                mixed.append(seen)

    async def write_generations() -> None:
        for generation in range(1, 21):
            await store.put_many(dict.fromkeys(keys, b"%d" % generation))

    await asyncio.gather(read_while_writing(), write_generations())
    assert mixed == []
    assert set(await store.get_many(keys)) == {b"20"}


async def test_put_if_absent_creates_once(harness: StoreHarness) -> None:
    store = harness.store
    assert await store.put_if_absent("dedupe/event-1", b"first") is True
    assert await store.put_if_absent("dedupe/event-1", b"second") is False
    assert await store.get("dedupe/event-1") == b"first"
    await store.delete("dedupe/event-1")
    assert await store.put_if_absent("dedupe/event-1", b"third") is True


async def test_put_if_absent_with_a_ttl_expires(harness: StoreHarness) -> None:
    store = harness.store
    assert await store.put_if_absent("lease/a", b"owner-1", ttl_s=1) is True
    assert await store.put_if_absent("lease/b", b"owner-1", ttl_s=60) is True
    assert await store.put_if_absent("lease/a", b"owner-2", ttl_s=1) is False

    await harness.advance(1.3)

    assert await store.get("lease/a") is None
    assert await store.keys("lease/") == ["lease/b"]
    assert await store.put_if_absent("lease/a", b"owner-2", ttl_s=1) is True
    assert await store.get("lease/a") == b"owner-2"


async def test_a_plain_put_clears_an_earlier_ttl(harness: StoreHarness) -> None:
    store = harness.store
    await store.put_if_absent("lease/a", b"temporary", ttl_s=1)
    await store.put("lease/a", b"for good")
    await harness.advance(1.3)
    assert await store.get("lease/a") == b"for good"


async def test_put_if_absent_rejects_a_ttl_that_is_not_positive(harness: StoreHarness) -> None:
    with pytest.raises(InvalidInputError):
        await harness.store.put_if_absent("k", b"v", ttl_s=0)
    assert await harness.store.get("k") is None


async def test_keys_lists_a_prefix_sorted_without_the_namespace(harness: StoreHarness) -> None:
    store = harness.store
    await store.put_many({"b/2": b"", "a/3": b"", "a/1": b"", "ab": b"", "a*x": b"", "a?": b""})
    assert await store.keys("a/") == ["a/1", "a/3"]
    # Glob characters in a prefix are plain characters.
    assert await store.keys("a*") == ["a*x"]
    assert await store.keys("a?") == ["a?"]
    assert await store.keys("") == ["a*x", "a/1", "a/3", "a?", "ab", "b/2"]
    assert await store.keys("zzz") == []


async def test_keys_of_another_namespace_are_invisible(harness: StoreHarness) -> None:
    await harness.store.put("shared-name", b"mine")
    other = harness.other_namespace()
    assert await other.get("shared-name") is None
    assert await other.keys("") == []
    await other.put("shared-name", b"theirs")
    assert await harness.store.get("shared-name") == b"mine"


async def test_delete_removes_a_key_and_ignores_a_missing_one(harness: StoreHarness) -> None:
    store = harness.store
    await store.put("k", b"v")
    await store.delete("k")
    await store.delete("never-there")
    assert await store.get("k") is None
    assert await store.keys("") == []


async def test_nothing_works_after_close(harness: StoreHarness) -> None:
    other = harness.other_namespace()
    await other.close()
    await other.close()
    with pytest.raises(PermanentError):
        await other.get("k")


# -- leases and fenced writes (BUS-8: one planner at a time; executors' target leases) --------


async def test_delete_if_equal_deletes_only_the_value_it_was_given(harness: StoreHarness) -> None:
    store = harness.store
    await store.put("lease/x", b"holder-1")
    assert await store.delete_if_equal("lease/x", b"holder-2") is False
    assert await store.get("lease/x") == b"holder-1"
    assert await store.delete_if_equal("lease/x", b"holder-1") is True
    assert await store.get("lease/x") is None
    assert await store.delete_if_equal("lease/x", b"holder-1") is False


async def test_take_lease_gives_one_holder_and_a_growing_epoch(harness: StoreHarness) -> None:
    """BUS-8: the second taker gets nothing while the first holds; after expiry the epoch grows."""
    store = harness.store
    first = await store.take_lease("planner/lease", epoch_key="planner/epoch", owner="a", ttl_s=1)
    assert first == b"1/a"
    assert await store.take_lease("planner/lease", epoch_key="planner/epoch", owner="b", ttl_s=1) is None
    assert token_epoch(first) == 1

    await harness.advance(1.3)

    second = await store.take_lease("planner/lease", epoch_key="planner/epoch", owner="b", ttl_s=5)
    assert second == b"2/b"
    # The first holder can neither renew nor release the second holder's lease.
    assert await store.renew_lease("planner/lease", first, ttl_s=5) is False
    assert await store.delete_if_equal("planner/lease", first) is False
    assert await store.get("planner/lease") == b"2/b"
    assert await store.get("planner/epoch") == b"2"


async def test_renew_lease_keeps_it_past_its_first_ttl(harness: StoreHarness) -> None:
    store = harness.store
    token = await store.take_lease("l", epoch_key="e", owner="a", ttl_s=1)
    assert token is not None
    await harness.advance(0.6)
    assert await store.renew_lease("l", token, ttl_s=1) is True
    await harness.advance(0.6)
    assert await store.get("l") == token  # 1.2 s after taking it: alive thanks to the renewal
    assert await store.take_lease("l", epoch_key="e", owner="b", ttl_s=1) is None
    await harness.advance(0.7)
    assert await store.renew_lease("l", token, ttl_s=1) is False  # expired: renewing does not revive it
    assert await store.get("l") is None


async def test_a_fenced_write_succeeds_only_for_the_current_holder(harness: StoreHarness) -> None:
    """BUS-8: a planner whose lease passed to another (it was paused past the TTL) writes nothing."""
    store = harness.store
    old = await store.take_lease("planner/lease", epoch_key="planner/epoch", owner="old", ttl_s=1)
    assert old is not None
    await store.put("journal/1", b"j1")
    assert await store.put_many_fenced(
        {"state": b"s1", "checkpoint": b"c1"}, fence_key="planner/lease", token=old, delete=["journal/1"]
    )
    assert await store.get_many(["state", "checkpoint", "journal/1"]) == [b"s1", b"c1", None]

    await harness.advance(1.3)
    # Expired, nobody took over yet: the old holder is refused all the same.
    assert not await store.put_many_fenced({"state": b"s2"}, fence_key="planner/lease", token=old)
    new = await store.take_lease("planner/lease", epoch_key="planner/epoch", owner="new", ttl_s=30)
    assert new is not None
    await store.put("journal/2", b"j2")
    refused = await store.put_many_fenced(
        {"state": b"s-stale", "checkpoint": b"c-stale"}, fence_key="planner/lease", token=old, delete=["journal/2"]
    )
    assert refused is False
    assert await store.get_many(["state", "checkpoint", "journal/2"]) == [b"s1", b"c1", b"j2"]
    assert await store.put_many_fenced({"state": b"s3"}, fence_key="planner/lease", token=new)
    assert await store.get("state") == b"s3"


async def test_a_fenced_write_is_seen_whole_or_not_at_all(harness: StoreHarness) -> None:
    store = harness.store
    token = await store.take_lease("f", epoch_key="fe", owner="w", ttl_s=30)
    assert token is not None
    keys = [f"wave/{n:03d}" for n in range(100)]
    await store.put_many(dict.fromkeys(keys, b"0"))
    mixed: list[set[bytes | None]] = []

    async def read_while_writing() -> None:
        for _ in range(30):
            seen = set(await store.get_many(keys))
            if len(seen) > 1:
                mixed.append(seen)

    async def write_generations() -> None:
        for generation in range(1, 11):
            assert await store.put_many_fenced(dict.fromkeys(keys, b"%d" % generation), fence_key="f", token=token)

    await asyncio.gather(read_while_writing(), write_generations())
    assert mixed == []


async def test_lease_ttls_must_be_positive(harness: StoreHarness) -> None:
    with pytest.raises(InvalidInputError):
        await harness.store.take_lease("l", epoch_key="e", owner="a", ttl_s=0)
    assert await harness.store.get("l") is None


# -- adapter-specific: the translations the contract above relies on ------------------------


async def test_redis_store_without_a_server_raises_transient_errors(unused_tcp_port: int) -> None:
    store = RedisStore(f"redis://127.0.0.1:{unused_tcp_port}/0", namespace="nobody")
    with pytest.raises(TransientError) as caught:
        await store.put_if_absent("k", b"v", ttl_s=5)
    assert caught.value.__cause__ is not None
    with pytest.raises(TransientError):
        await store.keys("")
    await store.close()
