"""The time up to which a monitor worker has read its heartbeat partitions: silences are judged there.

"No report within the staleness limit counts as not ready" (SPEC, terms): a worker that is behind on
a partition has not yet read the reports made meanwhile, and a cluster whose heartbeat waits in that
backlog is not silent. So a worker judges silence up to the oldest of two times: now, and for each
partition it has not read to the end, the newest record time it has judged there. Caught up on
every partition, that is now. A worker 20 s behind judges as of 20 s ago: a cluster that really
went silent is marked 20 s late, and one whose heartbeat is in the backlog is not marked at all.

A worker that reads nothing (stuck, or a partition it cannot fetch) must not keep its clusters fresh
for ever: the time judged is never more than `most_behind_s` (the staleness limit) before now, so a
silent cluster is marked stale within twice the limit whatever the worker's backlog.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PartitionRead:
    """How far one assigned heartbeat partition has been judged."""

    next_offset: int  # the first offset not judged yet
    highwater: int | None  # the partition's end offset at the last fetch; None: not fetched yet
    newest_at: float | None  # the newest record time judged on it since it was assigned

    @property
    def caught_up(self) -> bool:
        return self.highwater is not None and self.next_offset >= self.highwater


def judged_until(now: float, partitions: Iterable[PartitionRead], *, most_behind_s: float) -> float:
    """The time up to which silences are judged: now, or the newest record judged on the partition
    furthest behind, but never more than `most_behind_s` before now."""
    read_to = now
    for partition in partitions:
        if not partition.caught_up:
            read_to = min(read_to, partition.newest_at if partition.newest_at is not None else float("-inf"))
    return max(read_to, now - most_behind_s)


__all__ = ["PartitionRead", "judged_until"]
