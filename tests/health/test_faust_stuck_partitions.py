"""BUS-4: which partitions faust has stopped committing, read from its consumer's offsets.

`stuck_partitions` mirrors faust's own test in `Consumer._new_offset`: it returns nothing to commit
while the oldest acknowledged offset is more than one past a committed offset that is not 0.
These are the consumer's own fields, filled as faust fills them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from faust.types import TP

from rollout_adapters.faust_commit_gap import stuck_partitions

HEARTBEATS_0, HEARTBEATS_1, OTHER = TP("hb", 0), TP("hb", 1), TP("hb", 2)


@dataclass
class ConsumerOffsets:
    """The fields of a faust consumer that `stuck_partitions` reads."""

    _acked: dict[TP, list[int]]
    _committed_offset: dict[TP, int | None]
    assigned: set[TP] = field(default_factory=lambda: {HEARTBEATS_0, HEARTBEATS_1})

    def assignment(self) -> set[TP]:
        return self.assigned


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
