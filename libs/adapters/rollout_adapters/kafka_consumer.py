"""`KafkaConsumer`: one member of a consumer group, as the `Bus` port hands it out."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from aiokafka import AIOKafkaConsumer, TopicPartition  # type: ignore[import-untyped]
from aiokafka.abc import ConsumerRebalanceListener  # type: ignore[import-untyped]
from aiokafka.coordinator.assignors.range import RangePartitionAssignor  # type: ignore[import-untyped]

from rollout_adapters.kafka_clients import _quietly_closed
from rollout_adapters.kafka_errors import _translated
from rollout_adapters.kafka_port_records import port_records, to_port_record
from rollout_adapters.memory_bus import next_offsets
from rollout_common.errors import InvalidInputError, PermanentError, TransientError
from rollout_common.ports import Record, StartAt

if TYPE_CHECKING:
    from rollout_adapters.kafka_bus import KafkaBus


class _Ownership(ConsumerRebalanceListener):  # type: ignore[misc]
    """Follows which partitions the member owns, and keeps commits and rebalances apart.

    For at-least-once it commits nothing on revocation (records handed out by `poll` may still
    be in work); it only waits for a commit in flight to land before the partitions move.
    """

    def __init__(self, start_at: StartAt | None = None) -> None:
        self.commit_lock = asyncio.Lock()
        # Empty before the first assignment; None while a rebalance is under way.
        self.owned: frozenset[TopicPartition] | None = frozenset()
        self.start_at = start_at
        self.consumer: Any = None
        # Where `start_at` moved a partition, to be committed: the group's offset must follow, or a
        # partition skipped ahead shows lag (and replays on a plain consumer) until its next record.
        self.started_at: dict[TopicPartition, int] = {}

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        async with self.commit_lock:
            self.owned = None

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        if self.start_at is not None and self.consumer is not None:
            for tp in sorted(assigned):
                offset = self.start_at(tp.topic, tp.partition)
                if offset is not None:
                    # The owner's own checkpoint wins over the group's committed offset, either way:
                    # behind it (a store restored from an older backup) replays, ahead of it skips.
                    self.consumer.seek(tp, offset)
                    self.started_at[tp] = offset
        self.owned = frozenset(assigned)


class KafkaConsumer:
    """One member of a consumer group; joins on its first poll. Commits only by hand.

    Without a group, aiokafka assigns it every partition of its topics from the cluster's metadata
    (and new ones as they appear): no group coordinator is asked for anything."""

    def __init__(
        self,
        bus: KafkaBus,
        *,
        topics: Sequence[str],
        group: str | None,
        from_beginning: bool,
        start_at: StartAt | None = None,
    ) -> None:
        self._bus = bus
        self._topics = list(topics)
        self._group = group
        self._from_beginning = from_beginning
        self._ownership = _Ownership(start_at)
        self._consumer: Any = None
        self._start_lock = asyncio.Lock()
        self._closed = False

    def assignment(self) -> frozenset[tuple[str, int]]:
        """The (topic, partition) pairs this member owns now (empty before its first poll)."""
        if self._consumer is None:
            return frozenset()
        return frozenset((tp.topic, tp.partition) for tp in self._consumer.assignment())

    async def poll(self, *, max_records: int = 500, timeout_s: float = 1.0) -> list[Record]:
        if max_records < 1:
            raise InvalidInputError("max_records must be >= 1")
        consumer = await self._started()
        with _translated(f"poll {self._topics}", topics_checked=True):
            try:
                batches = await consumer.getmany(timeout_ms=int(timeout_s * 1000), max_records=max_records)
            except UnicodeDecodeError as exc:
                raise UnreadableRecordError(_unreadable(self._topics, self._group)) from exc
        if self._ownership.started_at:
            await self._commit_start_positions()
        # With `kafka_port_records` installed (every bus does) the fetcher built each `Record`.
        return [
            m if type(m) is Record else to_port_record(topic=tp.topic, partition=tp.partition, record=m)
            for tp in sorted(batches)
            for m in batches[tp]
        ]

    async def _commit_start_positions(self) -> None:
        """Commit where `start_at` started each partition (the records before it are done): once
        joined, before any record after it is handed out; a failed try is made again next poll."""
        started, self._ownership.started_at = self._ownership.started_at, {}
        try:
            await self._commit_owned(started)
        except TransientError:
            self._ownership.started_at = {**started, **self._ownership.started_at}

    async def positioned(self) -> None:
        """Joined, with a read position on every owned partition: whatever is published from now on
        is read. (A member of a new group that only starts its first poll after publishing could
        have its position set past a message published in between.)"""
        consumer = await self._started()
        while not consumer.assignment():
            with _translated(f"join group {self._group!r}"):
                await consumer.getmany(timeout_ms=100, max_records=1)
        for tp in consumer.assignment():
            with _translated(f"position on {tp.topic}[{tp.partition}]"):
                await consumer.position(tp)

    async def commit(self, records: Sequence[Record]) -> None:
        self._check_open()
        if self._group is None:
            raise InvalidInputError("a consumer without a group has no offsets to commit")
        await self._commit_owned({TopicPartition(*tp): offset for tp, offset in next_offsets(records).items()})

    async def _commit_owned(self, offsets: dict[TopicPartition, int]) -> None:
        if not offsets or self._consumer is None:
            return
        async with self._ownership.commit_lock:
            owned = self._ownership.owned
            if owned is None:
                raise TransientError(f"kafka: group {self._group!r} is rebalancing; commit again", retry_after_s=0.5)
            # Partitions that moved to another member are left out: their records are delivered
            # again to the new owner (at-least-once); committing them would be refused anyway.
            mine = {tp: offset for tp, offset in offsets.items() if tp in owned}
            if mine:
                with _translated(f"commit for group {self._group!r}"):
                    await self._consumer.commit(mine)

    async def close(self) -> None:
        """Leave the group (uncommitted records go to the partitions' next owner)."""
        if self._closed:
            return
        self._closed = True
        self._bus._forget(self)
        if self._consumer is not None:
            await _quietly_closed(self._consumer)

    def _check_open(self) -> None:
        if self._closed:
            raise PermanentError("the consumer is closed")
        self._bus._check_open()

    async def _started(self) -> Any:
        self._check_open()
        async with self._start_lock:
            if self._consumer is None:
                await self._bus._require_topics(self._topics)
                consumer = AIOKafkaConsumer(
                    **self._bus._client_settings(),
                    group_id=self._group,
                    enable_auto_commit=False,
                    auto_offset_reset="earliest" if self._from_beginning else "latest",
                    # Range, as MemoryBus: co-partitioned topics land on the same member.
                    partition_assignment_strategy=(RangePartitionAssignor,),
                    **asdict(self._bus.consumer_options),
                    value_deserializer=port_records,
                )
                self._ownership.consumer = consumer
                consumer.subscribe(self._topics, listener=self._ownership)
                doing = f"join group {self._group!r}" if self._group is not None else f"read {self._topics}"
                await self._bus._start(consumer, doing, topics_checked=True)
                self._consumer = consumer
            return self._consumer


class UnreadableRecordError(PermanentError):
    """A record the Kafka client cannot unpack, so it cannot be handed out, dead-lettered or skipped.
    `kafka_records.install()` (done by every bus) reads header names that are not UTF-8, the one
    known cause; this stays for a client whose fetcher that reader is not installed in."""


def _unreadable(topics: Sequence[str], group: str | None) -> str:
    # aiokafka decodes header names while unpacking a fetched batch and raises on every poll of
    # that partition; no service can see such a record, so the operator has to move past it.
    return (
        f"a record on {', '.join(topics)} has a header name that is not UTF-8, which the Kafka client cannot "
        f"read: find it with `kcat -C -t TOPIC -f '%p %o %h\\n'` and move group {group or 'GROUP'!r} past it with "
        "kafka-consumer-groups.sh --reset-offsets --to-offset OFFSET+1 --topic TOPIC:PARTITION "
        "(docs/security.md, Bad input)"
    )


__all__ = ["KafkaConsumer", "UnreadableRecordError"]
