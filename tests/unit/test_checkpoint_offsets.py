"""The checkpoint's offsets (BUS-6): which records of a poll the stored state already holds, and
where each partition is read from next once a poll is taken, looked up and moved per partition."""

from __future__ import annotations

import random

import pytest

from rollout_common.ports import Record
from rollout_planner.service.checkpoint import Checkpoint, partition_key


def _record(topic: str, partition: int, offset: int) -> Record:
    return Record(topic=topic, partition=partition, offset=offset, key=None, value=b"{}")


def test_bus6_records_below_the_next_offset_are_held_already_and_the_offsets_only_move_forward() -> None:
    checkpoint = Checkpoint(offsets={"r:0": 5, "r:1": 9})
    records = [_record("r", 0, 3), _record("r", 0, 5), _record("r", 0, 6), _record("u", 0, 0), _record("r", 1, 2)]

    assert [new for new, _ in checkpoint.not_applied(records)] == [False, True, True, True, False]
    checkpoint.advance_past(records)
    assert checkpoint.offsets == {"r:0": 7, "r:1": 9, "u:0": 1}


@pytest.mark.parametrize("seed", range(30))
def test_bus6_per_partition_lookups_agree_with_one_lookup_per_record(seed: int) -> None:
    """Generated polls (several topics and partitions, offsets in any order, some below the stored
    next offset): the same records are taken as new, and the same next offsets result, as when each
    record is looked up and advanced past on its own."""
    rng = random.Random(seed)
    stored = {partition_key(t, p): rng.randrange(0, 40) for t in "ab" for p in range(3) if rng.random() < 0.6}
    records = [_record(rng.choice("abc"), rng.randrange(3), rng.randrange(0, 60)) for _ in range(rng.randrange(0, 80))]

    checkpoint = Checkpoint(offsets=dict(stored))
    flags = [new for new, _ in checkpoint.not_applied(records)]
    checkpoint.advance_past(records)

    reference = Checkpoint(offsets=dict(stored))
    expected_flags = [r.offset >= stored.get(partition_key(r.topic, r.partition), 0) for r in records]
    for record in records:
        reference.advance(record.topic, record.partition, record.offset)
    assert flags == expected_flags
    assert checkpoint.offsets == reference.offsets
