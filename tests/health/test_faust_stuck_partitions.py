"""BUS-4: which partitions faust has stopped committing, read from its consumer's offsets.

`stuck_partitions` mirrors faust's own test in `Consumer._new_offset`: it returns nothing to commit
while the oldest acknowledged offset is more than one past a committed offset that is not 0.
These are the consumer's own fields, filled as faust fills them.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from aiokafka.errors import IllegalStateError
from faust.transport.consumer import Consumer
from faust.types import TP
from intervaltree import IntervalTree

from rollout_adapters.faust_commit_gap import (
    FAUST_FILTER_COMMITTABLE,
    _filter_committable_offsets,
    rewind_stuck,
    stuck_partitions,
)

HEARTBEATS_0, HEARTBEATS_1, OTHER = TP("hb", 0), TP("hb", 1), TP("hb", 2)


@dataclass(eq=False)
class ConsumerOffsets:
    """The fields of a faust consumer that `stuck_partitions` reads."""

    _acked: dict[TP, list[int]]
    _committed_offset: dict[TP, int | None]
    assigned: set[TP] = field(default_factory=lambda: {HEARTBEATS_0, HEARTBEATS_1})
    _gap: dict[TP, IntervalTree] = field(default_factory=dict)
    flow_active: bool = True
    sought: list[dict[TP, int]] = field(default_factory=list)
    revoked: set[TP] = field(default_factory=set)  # by a rebalance in faust's consumer thread
    _commit_fut: asyncio.Future[Any] | None = None  # faust's commit in flight

    def assignment(self) -> set[TP]:
        return self.assigned

    async def seek_wait(self, offsets: dict[TP, int]) -> None:
        self.sought.append(offsets)
        if offsets.keys() & self.revoked:
            raise IllegalStateError("No current assignment for partition")


def test_a_gap_after_the_committed_offset_is_stuck_with_both_offsets() -> None:
    consumer = ConsumerOffsets(_acked={HEARTBEATS_0: [12, 13, 14]}, _committed_offset={HEARTBEATS_0: 9})
    assert stuck_partitions(consumer) == {HEARTBEATS_0: (9, 12)}


def test_the_next_offset_or_one_after_it_is_committed_by_faust_so_not_stuck() -> None:
    consumer = ConsumerOffsets(
        _acked={HEARTBEATS_0: [10, 11], HEARTBEATS_1: [11]},
        _committed_offset={HEARTBEATS_0: 9, HEARTBEATS_1: 9},
    )
    assert stuck_partitions(consumer) == {HEARTBEATS_1: (9, 11)}


def test_a_committed_offset_of_0_or_none_is_committed_over_by_faust_so_not_stuck() -> None:
    consumer = ConsumerOffsets(
        _acked={HEARTBEATS_0: [5, 6], HEARTBEATS_1: [7]},
        _committed_offset={HEARTBEATS_0: 0, HEARTBEATS_1: None},
    )
    assert stuck_partitions(consumer) == {}


def test_nothing_acknowledged_or_a_partition_no_longer_assigned_is_not_stuck() -> None:
    consumer = ConsumerOffsets(
        _acked={HEARTBEATS_0: [], OTHER: [40]},
        _committed_offset={HEARTBEATS_0: 3, OTHER: 3},
    )
    assert stuck_partitions(consumer) == {}


def test_offsets_the_fetcher_skipped_count_as_acknowledged_as_in_faust() -> None:
    """faust's `_gap` (transaction markers, compacted records): skipped right after the committed
    offset, faust commits over them; skipped further on, the offsets before them are the gap."""
    consumer = ConsumerOffsets(
        _acked={HEARTBEATS_0: [12, 13], HEARTBEATS_1: [12, 13]},
        _committed_offset={HEARTBEATS_0: 9, HEARTBEATS_1: 9},
        _gap={HEARTBEATS_0: IntervalTree.from_tuples([(10, 12)]), HEARTBEATS_1: IntervalTree.from_tuples([(11, 12)])},
    )
    assert stuck_partitions(consumer) == {HEARTBEATS_1: (9, 11)}


async def test_a_rewind_that_fails_leaves_faust_to_commit_and_is_tried_again_later() -> None:
    """A partition revoked between reading the assignment and the seek: the seek raises, and the
    commit that asked for the rewind must still go on (an exception there stops faust's commits)."""
    consumer = ConsumerOffsets(_acked={HEARTBEATS_0: [12]}, _committed_offset={HEARTBEATS_0: 9}, revoked={HEARTBEATS_0})
    await rewind_stuck(consumer)
    await rewind_stuck(consumer)
    assert consumer.sought == [{HEARTBEATS_0: 9}, {HEARTBEATS_0: 9}]


async def test_no_partition_is_rewound_while_a_commit_is_in_flight() -> None:
    """faust's commit takes offsets 10 to 11 out of `_acked` and then waits for the producer's flush
    before the committed offset moves past them: meanwhile 12 looks like the oldest acknowledged
    offset after a committed 9. Seeking back then made the fetcher record a gap over offsets
    already acknowledged (the next test)."""
    consumer = ConsumerOffsets(_acked={HEARTBEATS_0: [12]}, _committed_offset={HEARTBEATS_0: 9})
    consumer._commit_fut = asyncio.get_running_loop().create_future()
    await rewind_stuck(consumer)
    assert consumer.sought == []
    consumer._commit_fut = None  # it ended without committing 10 and 11: now the partition is stuck
    await rewind_stuck(consumer)
    assert consumer.sought == [{HEARTBEATS_0: 9}]


class FaustOffsets:
    """A faust consumer's offset bookkeeping, run by faust's own methods."""

    _new_offset = Consumer._new_offset
    _should_commit = Consumer._should_commit
    _add_gap = Consumer._add_gap

    def __init__(self, *, committed: int, acked: range) -> None:
        self._committed_offset: defaultdict[TP, int | None] = defaultdict(lambda: None, {HEARTBEATS_0: committed})
        self._acked: defaultdict[TP, list[int]] = defaultdict(list, {HEARTBEATS_0: list(acked)})
        self._acked_index: defaultdict[TP, set[int]] = defaultdict(set, {HEARTBEATS_0: set(acked)})
        self._gap: defaultdict[TP, IntervalTree] = defaultdict(IntervalTree)


async def test_an_offset_both_skipped_and_acknowledged_is_counted_once() -> None:
    """Offsets 100 to 104 never acknowledged, 105 to 120 acknowledged; the rewind to 100 lands while
    faust hands over the record at 121, fetched before it, and faust records 101 to 121 as skipped.
    faust alone counts 105 to 120 twice: its first run of consecutive offsets ends at the first
    doubled one, and each commit moves the partition on by one offset."""
    faust_alone = FaustOffsets(committed=100, acked=range(105, 121))
    await faust_alone._add_gap(HEARTBEATS_0, 101, 121)
    assert FAUST_FILTER_COMMITTABLE(faust_alone, [HEARTBEATS_0]) == {HEARTBEATS_0: 106}
    assert faust_alone._acked[HEARTBEATS_0][:4] == [105, 106, 106, 107]

    mended = FaustOffsets(committed=100, acked=range(105, 121))
    await mended._add_gap(HEARTBEATS_0, 101, 121)
    assert _filter_committable_offsets(mended, iter([HEARTBEATS_0])) == {HEARTBEATS_0: 122}
    assert mended._acked[HEARTBEATS_0] == []
    assert not mended._gap[HEARTBEATS_0]


async def test_skipped_offsets_above_the_highest_acknowledged_wait_for_it() -> None:
    """A gap that begins past every acknowledged offset is not counted yet, as in faust."""
    consumer = FaustOffsets(committed=100, acked=range(100, 103))
    await consumer._add_gap(HEARTBEATS_0, 105, 107)
    assert _filter_committable_offsets(consumer, [HEARTBEATS_0]) == {HEARTBEATS_0: 103}
    assert sorted((iv.begin, iv.end) for iv in consumer._gap[HEARTBEATS_0]) == [(105, 108)]
