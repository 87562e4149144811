"""The Store contract: what the shell may rely on, whichever store it holds.

Every test runs against MemoryStore and against RedisStore on a real Redis (see conftest.py).
"""

from __future__ import annotations

import asyncio
from typing import Protocol

import pytest

from rollout_adapters.redis_store import RedisStore
from rollout_common.errors import InvalidInputError, PermanentError, TransientError
from rollout_common.ports import Store

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


# -- adapter-specific: the translations the contract above relies on ------------------------


async def test_redis_store_without_a_server_raises_transient_errors(unused_tcp_port: int) -> None:
    store = RedisStore(f"redis://127.0.0.1:{unused_tcp_port}/0", namespace="nobody")
    with pytest.raises(TransientError) as caught:
        await store.put_if_absent("k", b"v", ttl_s=5)
    assert caught.value.__cause__ is not None
    with pytest.raises(TransientError):
        await store.keys("")
    await store.close()
