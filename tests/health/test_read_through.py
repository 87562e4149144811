"""BUS-7 and the staleness limit: a worker judges silence only as far as it has read its heartbeat
partitions (`read_through`), and never further back than the limit."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rollout_health.read_through import PartitionRead, judged_until

LIMIT = 90.0


def test_caught_up_on_every_partition_silence_is_judged_now() -> None:
    reads = [PartitionRead(next_offset=40, highwater=40, newest_at=900.0), PartitionRead(0, 0, None)]
    assert judged_until(1000.0, reads, most_behind_s=LIMIT) == 1000.0


def test_behind_on_a_partition_silence_is_judged_as_of_its_newest_record_judged() -> None:
    reads = [PartitionRead(next_offset=40, highwater=40, newest_at=999.0), PartitionRead(7, 12, 980.0)]
    assert judged_until(1000.0, reads, most_behind_s=LIMIT) == 980.0


def test_a_partition_not_fetched_yet_or_with_nothing_judged_holds_silence_back_by_the_limit_at_most() -> None:
    assert judged_until(1000.0, [PartitionRead(3, None, 995.0)], most_behind_s=LIMIT) == 995.0
    assert judged_until(1000.0, [PartitionRead(0, 12, None)], most_behind_s=LIMIT) == 910.0
    # a worker reading nothing for ever does not keep its clusters fresh for ever
    assert judged_until(1000.0, [PartitionRead(7, 12, 100.0)], most_behind_s=LIMIT) == 910.0


partition_reads = st.builds(
    PartitionRead,
    next_offset=st.integers(0, 50),
    highwater=st.none() | st.integers(0, 50),
    newest_at=st.none() | st.floats(0.0, 2000.0),
)


@given(now=st.floats(0.0, 2000.0), reads=st.lists(partition_reads, max_size=6))
def test_silence_is_judged_between_the_limit_before_now_and_now_and_never_past_a_backlog(
    now: float, reads: list[PartitionRead]
) -> None:
    judged = judged_until(now, reads, most_behind_s=LIMIT)
    assert now - LIMIT <= judged <= now
    behind = [read for read in reads if not read.caught_up]
    for read in behind:
        assert judged <= max(now - LIMIT, read.newest_at if read.newest_at is not None else now - LIMIT)
    if not behind:
        assert judged == now
