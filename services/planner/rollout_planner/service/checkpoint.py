"""What the planner keeps in the store, and under which keys.

One atomic `put_many` writes a batch's journal entry with the checkpoint (offsets applied, timer,
outbox), so after a crash they always agree: the offsets say exactly which records the stored
state (snapshot plus journal) already contains, and the outbox holds what that decision still has
to publish. The status document follows the publish (`status_writer`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from pydantic import BaseModel, ConfigDict, Field

from rollout_common.errors import PermanentError
from rollout_common.ports import Record
from rollout_planner.service.outbox import OutboxMessage

SNAPSHOT_KEY = "planner/snapshot"
CHECKPOINT_KEY = "planner/checkpoint"
PUBLISHED_KEY = "planner/published"
CLOCK_ORIGIN_KEY = "planner/clock-origin"
STATUS_KEY = "status"
SEQUENCE_KEY = "sequence"


class IncompatibleSnapshotError(PermanentError):
    """The stored snapshot was written by another format version (or is damaged): the planner
    refuses to start rather than guess; migrate or remove it (see docs/operations.md)."""


class Checkpoint(BaseModel):
    model_config = ConfigDict(extra="forbid")

    batch: int = Field(default=0, description="number of the last persisted batch; outbox ids derive from it")
    offsets: dict[str, int] = Field(
        default_factory=dict, description='"topic:partition" -> the next offset not yet applied'
    )
    wake_at: float | None = Field(default=None, description="engine time of the timer the engine asked for")
    outbox: list[OutboxMessage] = Field(default_factory=list)

    def next_offset(self, topic: str, partition: int) -> int | None:
        """The first offset not yet in the snapshot; None for a partition it never read."""
        return self.offsets.get(partition_key(topic, partition))

    def advance(self, topic: str, partition: int, offset: int) -> None:
        key = partition_key(topic, partition)
        self.offsets[key] = max(self.offsets.get(key, 0), offset + 1)

    def advance_past(self, records: Iterable[Record]) -> None:
        """`advance` past every record: one key and one update per partition, not per record."""
        last: dict[tuple[str, int], int] = {}
        for record in records:
            where = (record.topic, record.partition)
            last[where] = max(last.get(where, -1), record.offset)
        for (topic, partition), offset in last.items():
            self.advance(topic, partition, offset)

    def not_applied(self, records: Iterable[Record]) -> Iterator[tuple[bool, Record]]:
        """Each record with whether the stored state lacks it (False: the snapshot already contains
        it, it came back after a crash), the partition's next offset looked up once per partition."""
        floors: dict[tuple[str, int], int] = {}
        for record in records:
            where = (record.topic, record.partition)
            floor = floors.get(where)
            if floor is None:
                floor = floors[where] = self.offsets.get(partition_key(*where), 0)
            yield record.offset >= floor, record


def partition_key(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"
