"""Rows of a faust table written with their changelog records sent a batch per partition.

faust sends each changelog record on its own: a `FutureMessage`, its place in faust's producer
buffer, a task step to send it, aiokafka's future for it and the callbacks of both, about 70 µs of
CPU per row in the health monitor. A worker at rest writes a row for one heartbeat in four (its
checkpoint), so that was a third of its CPU.

`ChangelogBatch.put` sets the row in the table's store at once (reads see it) and queues its
changelog record; before the event loop's next turn the queued records of each partition go to
aiokafka's producer (faust's own) as one batch. Each row's `done` is called once the broker has
acknowledged its batch: the caller acks its heartbeat there, so an offset is never committed
before the row it led to is on the changelog (as it is never before the readiness it led to).
The records are the ones faust would have written (same key and value bytes, same partition), so
a table recovers from them as from faust's own.

Without a started producer (a test driving the agent in process) a row goes through the table as
faust writes it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from typing import Any

from rollout_adapters.faust_producer import client_producer

log = logging.getLogger("rollout.health")

Done = Callable[[], object]
Row = tuple[bytes, bytes, Done]  # a changelog record's key and value, and what runs once it is sent
# Rows waiting for their turn to be sent before the writer waits (`room`): the producer takes them
# as fast as it can queue them, so this is reached only while the broker holds the producer up.
MAX_PENDING = 10_000


class ChangelogBatch:
    def __init__(self, table: Any) -> None:
        self._table = table
        # per changelog partition, the (key, value, done) of rows whose records are not sent yet
        self._pending: dict[int, list[Row]] = {}
        self._count = 0  # rows in `_pending`
        self._flushing: asyncio.Task[None] | None = None
        self.failure: BaseException | None = None

    def put(self, key: str, value: dict[str, Any], *, done: Done) -> None:
        """`value` is the row of `key` from now on; `done` runs once the broker acknowledged its
        changelog record (at once, when it goes through faust's own path)."""
        table = self._table
        producer = client_producer(table.app)
        if producer is None:
            table[key] = value
            done()
            return
        table.data[key] = value
        partition = table.partition_for_key(key)
        row = (table.key_serializer.dumps(key), table.value_serializer.dumps(value), done)
        self._pending.setdefault(partition, []).append(row)
        self._count += 1
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.get_running_loop().create_task(self._flush(producer))

    @property
    def full(self) -> bool:
        """`room` would wait."""
        return self._count >= MAX_PENDING

    async def room(self) -> None:
        """Wait while too many rows wait to be sent (a broker that holds the producer up)."""
        while self.full and self.failure is None:
            await self.settled()

    def check(self) -> None:
        """Raise the send failure that stopped the changelog, if any."""
        if self.failure is not None:
            raise self.failure

    async def settled(self) -> None:
        """Until every row put so far has its record queued in the producer (or the queueing failed)."""
        task = self._flushing
        if task is not None:
            await asyncio.wait({task})

    async def _flush(self, producer: Any) -> None:
        topic = self._table.changelog_topic.get_topic_name()
        while self._pending and self.failure is None:
            pending, self._pending, self._count = self._pending, {}, 0
            for partition, rows in pending.items():
                try:
                    await self._send(producer, topic, partition, rows)
                except Exception as exc:
                    self._failed(exc)
                    return

    async def _send(self, producer: Any, topic: str, partition: int, rows: list[Row]) -> None:
        batch, in_batch = producer.create_batch(), list[Row]()
        for row in rows:
            key, value, _ = row
            if batch.append(key=key, value=value, timestamp=None) is None:  # full: send it, start another
                await self._hand_over(producer, batch, topic, partition, in_batch)
                batch, in_batch = producer.create_batch(), list[Row]()
                batch.append(key=key, value=value, timestamp=None)
            in_batch.append(row)
        await self._hand_over(producer, batch, topic, partition, in_batch)

    async def _hand_over(self, producer: Any, batch: Any, topic: str, partition: int, rows: list[Row]) -> None:
        delivery: asyncio.Future[Any] = await producer.send_batch(batch, topic, partition=partition)
        delivery.add_done_callback(functools.partial(self._delivered, rows))

    def _delivered(self, rows: list[Row], delivery: asyncio.Future[Any]) -> None:
        """The batch is on the broker: its rows are done. A batch refused (after the producer's
        retries) finishes none of them, so none of their heartbeats' offsets is committed."""
        error: BaseException | None
        if delivery.cancelled():
            error = asyncio.CancelledError("the changelog send was cancelled")
        else:
            error = delivery.exception()
        if error is not None:
            self._failed(error)
            return
        for _, _, done in rows:
            done()

    def _failed(self, exc: BaseException) -> None:
        """The worker stops at its next heartbeat (`check`) and is restarted: it replays from the
        last committed offset."""
        log.error("a table changelog send failed", extra={"error": repr(exc)})
        if self.failure is None:
            self.failure = exc


__all__ = ["ChangelogBatch"]
