"""An in-memory Kafka: the bus the embedded mode and the tests run on.

It keeps Kafka's rules rather than a queue's, so code that works here works against a broker:
topics exist only once created, keyed records land on the partition Kafka's default partitioner
picks, offsets are per partition, a consumer group splits partitions among its live members
(range assignment) and delivery is at-least-once from the committed offsets.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from rollout_common.errors import InvalidInputError, PermanentError, UnknownTopicError
from rollout_common.ports import Outgoing, Record, StartAt, TopicSpec

TopicPartition = tuple[str, int]

# A Kafka producer's default max_request_size: larger records are refused before they are sent.
MAX_MESSAGE_BYTES = 1_048_576

_MASK32 = 0xFFFFFFFF
_MURMUR_M = 0x5BD1E995
_MURMUR_SEED = 0x9747B28C


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit MurmurHash2 (seed 0x9747b28c), as its default partitioner computes it."""
    h = (_MURMUR_SEED ^ len(data)) & _MASK32
    whole = len(data) - len(data) % 4
    for i in range(0, whole, 4):
        k = (int.from_bytes(data[i : i + 4], "little") * _MURMUR_M) & _MASK32
        k ^= k >> 24
        k = (k * _MURMUR_M) & _MASK32
        h = ((h * _MURMUR_M) & _MASK32) ^ k
    if whole < len(data):
        h = ((h ^ int.from_bytes(data[whole:], "little")) * _MURMUR_M) & _MASK32
    h ^= h >> 13
    h = (h * _MURMUR_M) & _MASK32
    return h ^ (h >> 15)


def kafka_partition(key: bytes, partitions: int) -> int:
    """The partition a keyed record goes to: the same number a real producer picks for the key."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def range_assign(members: Sequence[str], partitions: int) -> dict[str, list[int]]:
    """Kafka's range assignor for one topic: contiguous runs, the first members get one extra."""
    ordered = sorted(members)
    share, extra = divmod(partitions, len(ordered))
    result: dict[str, list[int]] = {}
    start = 0
    for index, member in enumerate(ordered):
        size = share + (1 if index < extra else 0)
        result[member] = list(range(start, start + size))
        start += size
    return result


@dataclass
class _Topic:
    spec: TopicSpec
    logs: list[list[Record]]
    next_unkeyed: int = 0

    def partition_for(self, key: bytes | None) -> int:
        if key is not None:
            return kafka_partition(key, len(self.logs))
        # Unkeyed records spread round-robin: deterministic, unlike a real producer's choice.
        partition = self.next_unkeyed % len(self.logs)
        self.next_unkeyed += 1
        return partition


@dataclass
class _Group:
    members: dict[str, frozenset[str]] = field(default_factory=dict)  # member id -> its topics
    assignment: dict[str, frozenset[TopicPartition]] = field(default_factory=dict)
    committed: dict[TopicPartition, int] = field(default_factory=dict)
    generation: int = 0


class MemoryBus:
    """Implements `rollout_common.ports.Bus` in one process, with Kafka's semantics."""

    def __init__(self, *, max_message_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self._max_message_bytes = max_message_bytes
        self._topics: dict[str, _Topic] = {}
        self._groups: dict[str, _Group] = {}
        self._faults: dict[str, deque[Exception]] = {}
        self._member_ids = itertools.count()
        self._changed = asyncio.Event()
        self._closed = False
        self.commits_held: asyncio.Event | None = None  # `hold_commits`

    # -- the port -------------------------------------------------------------------------

    async def ensure_topics(self, topics: Sequence[TopicSpec]) -> None:
        self._check_open()
        for spec in topics:
            if spec.partitions < 1:
                raise InvalidInputError(f"topic {spec.name!r}: partitions must be >= 1")
            # An existing topic is kept as it is, as a broker answers TopicAlreadyExists.
            self._topics.setdefault(spec.name, _Topic(spec, [[] for _ in range(spec.partitions)]))

    async def publish_many(self, messages: Sequence[Outgoing]) -> None:
        for message in messages:
            await self.publish(message.topic, key=message.key, value=message.value, headers=message.headers)

    async def publish(
        self, topic: str, *, key: bytes | None, value: bytes, headers: Mapping[str, bytes] | None = None
    ) -> None:
        self._check_open()
        self._raise_injected("publish")
        target = self._topic(topic)
        size = len(value) + len(key or b"") + sum(len(k) + len(v) for k, v in (headers or {}).items())
        if size > self._max_message_bytes:
            raise PermanentError(f"record of {size} bytes is over the {self._max_message_bytes}-byte limit")
        partition = target.partition_for(key)
        log = target.logs[partition]
        log.append(
            Record(
                topic=topic,
                partition=partition,
                offset=len(log),
                key=key,
                value=value,
                # Copied and frozen: the publisher may reuse its dict, and every group shares
                # the same stored record.
                headers=MappingProxyType(dict(headers or {})),
                timestamp_ms=int(time.time() * 1000),
            )
        )
        self._notify()

    def consumer(
        self,
        topics: Sequence[str],
        *,
        group: str | None,
        from_beginning: bool = True,
        start_at: StartAt | None = None,
    ) -> MemoryConsumer:
        self._check_open()
        if group is None and start_at is not None:
            raise InvalidInputError("start_at needs a group: a consumer without one starts at the beginning or the end")
        member_id = f"{group}-{next(self._member_ids):06d}"
        # Without a group the consumer is the only member of a group of its own, which no other
        # consumer can name: it owns every partition, as a Kafka consumer that assigns them itself.
        return MemoryConsumer(
            self,
            topics=topics,
            group=group if group is not None else f"\0{member_id}",
            grouped=group is not None,
            member_id=member_id,
            from_beginning=from_beginning,
            start_at=start_at,
        )

    async def close(self) -> None:
        self._closed = True
        self._notify()

    # -- hooks for tests ------------------------------------------------------------------

    def fail_next_publish(self, exc: Exception) -> None:
        """The next `publish` raises `exc` and stores nothing (e.g. a TransientError)."""
        self._faults.setdefault("publish", deque()).append(exc)

    def fail_next_poll(self, exc: Exception) -> None:
        """The next `poll` of any consumer raises `exc`, before any record is handed out."""
        self._faults.setdefault("poll", deque()).append(exc)

    def hold_commits(self) -> asyncio.Event:
        """Every `commit` waits until the event returned is set (a slow group coordinator)."""
        self.commits_held = asyncio.Event()
        return self.commits_held

    def fail_next_commit(self, exc: Exception) -> None:
        """The next `commit` of any consumer raises `exc` and commits nothing."""
        self._faults.setdefault("commit", deque()).append(exc)

    def records(self, topic: str) -> list[Record]:
        """Every record of a topic, partition by partition: what a test asserts was published."""
        return [record for log in self._topic(topic).logs for record in log]

    def committed(self, group: str, topic: str) -> dict[int, int]:
        """The group's committed offsets of a topic, by partition."""
        offsets = self._groups.get(group, _Group()).committed
        return {partition: offset for (name, partition), offset in offsets.items() if name == topic}

    # -- shared with MemoryConsumer -------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise PermanentError("the bus is closed")

    def _raise_injected(self, operation: str) -> None:
        pending = self._faults.get(operation)
        if pending:
            raise pending.popleft()

    def _topic(self, name: str) -> _Topic:
        try:
            return self._topics[name]
        except KeyError:
            raise UnknownTopicError(f"topic {name!r} does not exist (create it with ensure_topics)") from None

    def _group(self, name: str) -> _Group:
        return self._groups.setdefault(name, _Group())

    def _notify(self) -> None:
        # Wake every waiting poll; each poller took the old event before looking for data, so
        # nothing published in between is missed.
        self._changed.set()
        self._changed = asyncio.Event()

    def _join(self, group: str, *, member_id: str, topics: frozenset[str]) -> None:
        for name in topics:
            self._topic(name)
        self._group(group).members[member_id] = topics
        self._rebalance(group)

    def _leave(self, group: str, member_id: str) -> None:
        self._group(group).members.pop(member_id, None)
        self._rebalance(group)

    def _rebalance(self, group_name: str) -> None:
        group = self._group(group_name)
        owned: dict[str, set[TopicPartition]] = {member: set() for member in group.members}
        for topic in sorted(set().union(*group.members.values())):
            subscribers = [member for member, topics in group.members.items() if topic in topics]
            split = range_assign(subscribers, len(self._topics[topic].logs))
            for member, partitions in split.items():
                owned[member].update((topic, p) for p in partitions)
        group.assignment = {member: frozenset(tps) for member, tps in owned.items()}
        group.generation += 1
        self._notify()


class MemoryConsumer:
    """One member of a consumer group on a `MemoryBus`; joins on its first poll, like Kafka's."""

    def __init__(
        self,
        bus: MemoryBus,
        *,
        topics: Sequence[str],
        group: str,
        member_id: str,
        from_beginning: bool,
        start_at: StartAt | None = None,
        grouped: bool = True,
    ) -> None:
        self._bus = bus
        self._grouped = grouped
        self._start_at = start_at
        self._topics = frozenset(topics)
        self._group = group
        self._member_id = member_id
        self._from_beginning = from_beginning
        self._positions: dict[TopicPartition, int] = {}
        self._generation = -1
        self._joined = False
        self._closed = False
        self._rotation = 0

    def assignment(self) -> frozenset[TopicPartition]:
        """The (topic, partition) pairs this member owns now (empty before its first poll)."""
        if not self._joined:
            return frozenset()
        return self._bus._group(self._group).assignment.get(self._member_id, frozenset())

    async def poll(self, *, max_records: int = 500, timeout_s: float = 1.0) -> list[Record]:
        self._check_open()
        if max_records < 1:
            raise InvalidInputError("max_records must be >= 1")
        self._bus._raise_injected("poll")
        if not self._joined:
            self._bus._join(self._group, member_id=self._member_id, topics=self._topics)
            self._joined = True
        deadline = time.monotonic() + timeout_s
        while True:
            changed = self._bus._changed
            self._follow_rebalance()
            batch = self._take(max_records)
            remaining = deadline - time.monotonic()
            if batch or remaining <= 0 or self._closed or self._bus._closed:
                return batch
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), remaining)

    async def commit(self, records: Sequence[Record]) -> None:
        self._check_open()
        if not self._grouped:
            raise InvalidInputError("a consumer without a group has no offsets to commit")
        self._bus._raise_injected("commit")
        if self._bus.commits_held is not None:
            await self._bus.commits_held.wait()
        group = self._bus._group(self._group)
        owned = self.assignment()
        for tp, offset in next_offsets(records).items():
            # A partition that moved to another member is not ours to commit: its records
            # are delivered again to the new owner (at-least-once), as Kafka rejects the commit.
            if tp in owned:
                group.committed[tp] = offset

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._joined:
            self._bus._leave(self._group, self._member_id)

    def _check_open(self) -> None:
        if self._closed:
            raise PermanentError("the consumer is closed")
        self._bus._check_open()

    def _follow_rebalance(self) -> None:
        group = self._bus._group(self._group)
        if group.generation == self._generation:
            return
        # Eager rebalancing, as Kafka's classic protocol: after any rebalance every owned
        # partition restarts from the committed offset, even one this member kept.
        self._generation = group.generation
        self._positions = {tp: self._start_offset(group, tp) for tp in self.assignment()}
        if self._start_at is not None:
            # As the Kafka consumer: the group's offset follows where `start_at` started a partition.
            for tp, position in self._positions.items():
                if self._start_at(*tp) is not None:
                    group.committed[tp] = position

    def _start_offset(self, group: _Group, tp: TopicPartition) -> int:
        wanted = self._start_at(*tp) if self._start_at is not None else None
        if wanted is not None:
            # As Kafka's seek: past the end waits for new records; before the log starts reads from it.
            return max(0, min(wanted, len(self._bus._topics[tp[0]].logs[tp[1]])))
        committed = group.committed.get(tp)
        if committed is not None:
            return committed
        return 0 if self._from_beginning else len(self._bus._topics[tp[0]].logs[tp[1]])

    def _take(self, max_records: int) -> list[Record]:
        partitions = sorted(self._positions)
        if not partitions:
            return []
        # Start at a different partition each poll so a busy one cannot starve the others.
        start = self._rotation % len(partitions)
        self._rotation += 1
        batch: list[Record] = []
        for tp in partitions[start:] + partitions[:start]:
            log = self._bus._topics[tp[0]].logs[tp[1]]
            taken = log[self._positions[tp] : self._positions[tp] + max_records - len(batch)]
            self._positions[tp] += len(taken)
            batch.extend(taken)
        return batch


def next_offsets(records: Sequence[Record]) -> dict[TopicPartition, int]:
    """Per partition, the offset after the highest given record: what Kafka stores as committed."""
    offsets: dict[TopicPartition, int] = {}
    for record in records:
        tp = (record.topic, record.partition)
        offsets[tp] = max(offsets.get(tp, 0), record.offset + 1)
    return offsets
