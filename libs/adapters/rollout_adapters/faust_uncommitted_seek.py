"""faust's "seek back to the committed offset" must also rewind a partition nobody committed yet.

faust (0.15) reads a partition's records only while its flow is on. Records fetched while the flow
is off (a rebalance, a table recovery) are dropped, and faust rewinds by seeking every assigned
partition to its committed offset (`Consumer.perform_seek`, after each recovery and whenever a
fetch comes back with the flow off). aiokafka's `seek_to_committed` seeks only partitions whose
committed offset is above 0: a partition without one stays where the dropped fetch left it, so
the records it skipped are never read.

In the health monitor this lost heartbeats for good: a worker killed before its first commit left
its partitions without a committed offset; the survivor that took them fetched from the start of
the log while it restored the table, dropped what it fetched, and started its agent at the end of
the log, so the clusters whose heartbeats were in between were never judged.

`install()` wraps faust's aiokafka consumer thread's `seek_to_committed`: a partition of an acked
(agent) topic without a committed offset, or with 0, is sought to its beginning, which is where
the consumer's `auto_offset_reset="earliest"` starts it. Changelog partitions (not acked) are left
to the table recovery, which seeks them itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread

# faust's own method, as imported before `install` wraps it.
FAUST_SEEK_TO_COMMITTED: Any = AIOKafkaConsumerThread.seek_to_committed


async def _seek_in_thread(thread: Any, consumer: Any) -> Mapping[Any, int | None]:
    committed: Mapping[Any, int | None] = await consumer.seek_to_committed()
    if thread.app.conf.consumer_auto_offset_reset == "earliest":
        acked = thread.app.topics.acks_enabled_for
        assigned = consumer.assignment()  # a rebalance may have taken some while their offsets were asked
        uncommitted = [
            tp
            for tp, offset in committed.items()
            if (offset is None or offset <= 0) and acked(tp.topic) and tp in assigned
        ]
        if uncommitted:
            await consumer.seek_to_beginning(*uncommitted)
    return committed


async def _seek_to_committed(thread: Any) -> Mapping[Any, int | None]:
    result: Mapping[Any, int | None] = await thread.call_thread(_seek_in_thread, thread, thread._ensure_consumer())
    return result


def install() -> None:
    """Make every faust consumer of this process rewind uncommitted partitions as committed ones."""
    if AIOKafkaConsumerThread.seek_to_committed is FAUST_SEEK_TO_COMMITTED:
        AIOKafkaConsumerThread.seek_to_committed = _seek_to_committed  # type: ignore[method-assign,assignment]


__all__ = ["FAUST_SEEK_TO_COMMITTED", "install"]
