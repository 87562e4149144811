"""A partition whose commits faust has stopped for good is read again from its committed offset.

faust (0.15) commits a partition up to the first gap in its acknowledged offsets, counted from the
offset it believes committed (`Consumer._new_offset`): with the oldest acknowledged offset more than
one past that, it commits nothing there, and waits for acknowledgements of the offsets between.
Those never come when their records were never handed to the agent, and faust fetches nothing
twice unless a rebalance seeks back. The partition's committed offset then stays where it was for
as long as the worker lives, its acknowledged offsets pile up in memory, and a restarted worker
reads the whole partition again.

The health monitor's workers got there in the sustained health run (about one run in three on a
loaded 2-core machine), twice right after the second rebalance of their group (two of four
heartbeat partitions left committed at offset 1 and 2 while every heartbeat after the first 503 of
each was judged and acknowledged; the 503 in between were never judged) and once in the middle of
a run with no rebalance (some 370 offsets on each of two partitions). Which of faust's paths lost
those acknowledgements was not pinned down. One that can: a rebalance resumes the flow before
faust's seek to the committed offsets (partition by partition, from the broker) has finished, and
that seek forgets the read offset of a partition it found without a committed one, so records
skipped meanwhile leave no gap that faust would commit over.

`install()` wraps faust's commit: before it, each assigned partition in that state is sought back
to its committed offset, so the records in the gap are read again (the monitor judges a heartbeat
it already saw as one that changes nothing) and the commits go on. The agent acknowledges a
partition's records in order (one agent, and `InFlight` finishes them in arrival order), so the
state is never a commit merely waiting on an earlier record. When the seek lands while faust is
still handing over records it fetched before it, faust takes the next of those as a jump past the
new read offset, records the offsets in between as skipped and commits over them: the partition
commits again, but those heartbeats are not judged (each cluster's next heartbeat stands in for
its skipped one, as after any lost heartbeat).

Two of faust's steps had to be mended for this to hold:
- A commit takes the partition's oldest run of acknowledged offsets out of its bookkeeping
  (`_new_offset`) before it commits them, and between the two waits for the producer's flush:
  seconds when the producer's buffer is full. Seen from another commit meanwhile, the partition
  looked exactly like one with offsets never acknowledged. Such a partition is never rewound
  while a commit is in flight.
- faust counts the offsets its fetcher skipped (`_gap`) as acknowledged by adding them to the
  acknowledged ones, without looking whether they are there already. After a rewind that raced a
  fetch, the skipped range holds offsets the agent had acknowledged, and each of those was then
  counted twice. A doubled offset ends faust's first run of consecutive offsets, so each commit
  moved the partition on by one offset: about one record every 2.8 s for a partition thousands
  behind (a steady benchmark run of 136,000 heartbeats never finished). The skipped offsets are
  now added just before faust looks for that run, each offset once.
"""

from __future__ import annotations

import logging
import time
import weakref
from typing import Any

from faust.transport.consumer import Consumer

log = logging.getLogger(__name__)

# faust's own methods, as imported before `install` wraps them.
FAUST_COMMIT: Any = Consumer.commit
FAUST_FILTER_COMMITTABLE: Any = Consumer._filter_committable_offsets
# A partition read again from an offset is not sought back there again before this: the records
# already queued for the agent come first, and a busy agent may take several commit intervals to
# reach the ones read again.
REWIND_AGAIN_AFTER_S = 30.0
# per consumer: partition -> (the committed offset it was sought back to, when)
_rewound: weakref.WeakKeyDictionary[Any, dict[Any, tuple[int, float]]] = weakref.WeakKeyDictionary()


def stuck_partitions(consumer: Any) -> dict[Any, tuple[int, int]]:
    """Assigned partitions faust will not commit again: partition -> (committed, oldest acknowledged)."""
    assigned = consumer.assignment()
    stuck = {}
    for tp, acked in list(consumer._acked.items()):
        committed = consumer._committed_offset.get(tp)
        # faust's own test (`_new_offset`): a gap of one past the committed offset it commits over,
        # and from a committed offset of 0 it commits over any gap (so that partition is not stuck)
        if not (acked and committed and tp in assigned):
            continue
        # ...after counting as acknowledged the offsets its fetcher skipped (`_gap`: transaction
        # markers, compacted records), as `_new_offset` does
        oldest = min([min(acked), *(iv.begin for iv in consumer._gap.get(tp) or () if iv.begin < max(acked))])
        if oldest - committed > 1:
            stuck[tp] = (committed, oldest)
    return stuck


async def rewind_stuck(consumer: Any) -> None:
    """Seek each partition faust will not commit again back to its committed offset."""
    if not consumer.flow_active:
        return  # a rebalance: its recovery seeks every partition to its committed offset anyway
    if consumer._commit_fut is not None:
        # faust's commit in flight took its offsets out of `_acked` and has not yet raised the
        # committed offset past them: no partition can be told stuck until it has
        return
    rewound = _rewound.setdefault(consumer, {})
    now = time.monotonic()
    for tp, (committed, oldest) in stuck_partitions(consumer).items():
        last = rewound.get(tp)
        if last is not None and last[0] == committed and now - last[1] < REWIND_AGAIN_AFTER_S:
            continue
        rewound[tp] = (committed, now)
        log.warning(
            "%s[%d]: offsets %d to %d were never acknowledged, so nothing after %d can be committed; "
            "reading them again",
            tp.topic,
            tp.partition,
            committed,
            oldest - 1,
            committed,
        )
        # in faust's consumer thread, and faust reads from there on again (its read offset)
        try:
            await consumer.seek_wait({tp: committed})
        except Exception as exc:  # e.g. the partition was revoked meanwhile: faust's commit must go on
            log.warning("%s[%d]: reading from %d again failed (%r); trying at a later commit", *tp, committed, exc)
            rewound.pop(tp, None)


def count_skipped_once(consumer: Any, tp: Any) -> None:
    """Add the offsets faust's fetcher skipped below the highest acknowledged one to the acknowledged
    ones, as faust's `_new_offset` does, but each offset once, and take them out of `_gap`."""
    acked = consumer._acked.get(tp)
    gap = consumer._gap.get(tp)
    if not (acked and gap):
        return
    skipped = gap.overlap(0, max(acked))
    if not skipped:
        return
    offsets = set(acked)
    end = max(acked) + 1
    for interval in skipped:
        offsets.update(range(interval.begin, interval.end))
        end = max(end, interval.end)
    acked[:] = sorted(offsets)
    gap.chop(0, end)


def _filter_committable_offsets(self: Any, tps: Any) -> Any:
    # synchronous from here to faust's `_new_offset`: no fetch can add a gap in between
    tps = list(tps)
    for tp in tps:
        count_skipped_once(self, tp)
    return FAUST_FILTER_COMMITTABLE(self, tps)


async def _commit(self: Any, topics: Any = None, start_new_transaction: bool = True) -> bool:
    await rewind_stuck(self)
    committed: bool = await FAUST_COMMIT(self, topics, start_new_transaction)
    return committed


def install() -> None:
    """Make every faust consumer of this process read a partition it stopped committing again, and
    count each offset its fetcher skipped once."""
    if Consumer.commit is FAUST_COMMIT:
        Consumer.commit = _commit  # type: ignore[method-assign]
    if Consumer._filter_committable_offsets is FAUST_FILTER_COMMITTABLE:
        Consumer._filter_committable_offsets = _filter_committable_offsets  # type: ignore[method-assign]


__all__ = [
    "FAUST_COMMIT",
    "FAUST_FILTER_COMMITTABLE",
    "count_skipped_once",
    "install",
    "rewind_stuck",
    "stuck_partitions",
]
