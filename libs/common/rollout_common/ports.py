"""The two ports the shell talks through: a message bus and a key-value store.

Both are small on purpose. Every adapter (in-memory, Kafka, Redis) raises only the errors of
`rollout_common.errors`, so callers decide "retry later" or "give up" without knowing which
adapter they hold.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Record:
    """One message as a consumer sees it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: Mapping[str, bytes] = field(default_factory=dict)
    timestamp_ms: int = 0


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One message to publish."""

    topic: str
    key: bytes | None
    value: bytes
    headers: Mapping[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int = 1
    compacted: bool = False
    retention_ms: int | None = None


def token_epoch(token: bytes) -> int:
    """The epoch of a lease token made by `Store.take_lease` (`b"<epoch>/<owner>"`)."""
    return int(token.split(b"/", 1)[0])


StartAt = Callable[[str, int], int | None]


class Consumer(Protocol):
    """A member of a consumer group, offsets committed by hand after the work is done; or, made
    without a group, a reader of every partition that commits nothing (`commit` raises)."""

    async def poll(self, *, max_records: int = 500, timeout_s: float = 1.0) -> list[Record]: ...

    async def commit(self, records: Sequence[Record]) -> None:
        """Commit past every record given (per partition, the highest offset + 1)."""

    async def close(self) -> None: ...


class Bus(Protocol):
    async def ensure_topics(self, topics: Sequence[TopicSpec]) -> None: ...

    async def publish(
        self, topic: str, *, key: bytes | None, value: bytes, headers: Mapping[str, bytes] | None = None
    ) -> None:
        """Durably publish (returns once the broker acknowledged it)."""

    async def publish_many(self, messages: Sequence[Outgoing]) -> None:
        """Durably publish every message, all in flight at once (returns once the broker
        acknowledged each). Each partition's messages keep their order; there is none between
        partitions. On a failure some may have gone out: a retry publishes them again (at least once)."""

    def consumer(
        self,
        topics: Sequence[str],
        *,
        group: str | None,
        from_beginning: bool = True,
        start_at: StartAt | None = None,
    ) -> Consumer:
        """A group member. `start_at(topic, partition)`, asked at every assignment, gives the offset
        to read from (a service's own checkpoint, before or after the group's committed offset);
        None: the committed offset (or the beginning/end, after `from_beginning`).

        `group=None`: no group at all. The consumer assigns itself every partition of the topics,
        so no group coordinator is involved (a reader that must keep going while the broker
        coordinating groups fails over), and it has nothing to commit to."""
        ...

    async def close(self) -> None: ...


class Store(Protocol):
    async def get(self, key: str) -> bytes | None: ...

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]: ...

    async def put(self, key: str, value: bytes) -> None: ...

    async def put_many(self, items: Mapping[str, bytes]) -> None:
        """Write every item or none (atomic)."""

    async def put_if_absent(self, key: str, value: bytes, *, ttl_s: int | None = None) -> bool:
        """True when this call created the key: the basis of every dedupe."""

    async def delete(self, key: str) -> None: ...

    async def delete_if_equal(self, key: str, value: bytes) -> bool:
        """Delete `key` only while it holds `value` (atomic compare-and-delete); True if deleted."""

    async def take_lease(self, key: str, *, epoch_key: str, owner: str, ttl_s: float) -> bytes | None:
        """When nobody holds `key` (absent or expired): add one to the counter `epoch_key` and set
        `key` to the token `b"<epoch>/<owner>"` for `ttl_s` seconds, atomically, and return the
        token. None while another token is there. Epochs only grow: a fencing token."""

    async def renew_lease(self, key: str, token: bytes, *, ttl_s: float) -> bool:
        """Give `key` `ttl_s` seconds more, only while it still holds `token` (atomic)."""

    async def put_many_fenced(
        self, items: Mapping[str, bytes], *, fence_key: str, token: bytes, delete: Sequence[str] = ()
    ) -> bool:
        """`put_many(items)` and delete `delete`, all or nothing, only while `fence_key` holds
        `token` (one atomic step). False: refused, nothing written."""

    async def keys(self, prefix: str) -> list[str]: ...

    async def close(self) -> None: ...
