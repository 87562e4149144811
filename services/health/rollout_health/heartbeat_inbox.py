"""Heartbeats handed from faust's consumer to the monitor's agent a batch at a time, not one by one.

faust (0.15) turns every fetched record into an `Event` (its key and value schemas), puts it on the
agent's stream queue, and resumes the stream's iterator for it; the stream tracks, buffers and acks
each one. At rest that was about 60 µs of a worker's CPU per heartbeat, more than the monitor's own
work. For the heartbeats topic the conductor's per-partition callback is replaced by one that
appends faust's message to the batch waiting on the agent's stream queue (one queue item, and so
one turn of the stream's iterator, per batch): the agent takes what arrived while it was busy and
tracks, judges and acks each message itself (`HealthMonitor`), so faust still commits only what
the agent acked and a rebalance still waits for what it started.

What faust's own callback does first is kept: wait while the flow is suspended (a rebalance) and
while the producer's buffer is full. A batch belongs to one consumer generation: after a rebalance
faust clears the stream queues, as it does each time its flow resumes, and the next message starts
a new batch. At most `limit` messages
wait for the agent; beyond that the callback waits, as faust's does on a full stream queue.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import faust
from faust.types import TP, Message


class HeartbeatBatch(list[Message]):
    """Messages of one consumer generation, in the order fetched."""

    def __init__(self, generation_id: int | None) -> None:
        super().__init__()
        self.generation_id = generation_id


class HeartbeatInbox:
    def __init__(self, app: faust.App, *, topic: str, batch_max: int) -> None:
        self._app = app
        self._topic = topic
        self._batch_max = batch_max
        self._limit = 4 * batch_max
        self._pending: HeartbeatBatch | None = None  # on the queue, not taken by the agent yet
        self._waiting = 0  # messages handed over and not taken yet
        self._room = asyncio.Event()
        self._room.set()
        self._watched: weakref.WeakSet[Any] = weakref.WeakSet()  # queues whose clear resets this inbox

    def install(self) -> None:
        """Route the heartbeats topic's partitions through `_handler`, once the app has a conductor."""
        conductor: Any = self._app.topics
        build = conductor._build_handler

        def build_handler(tp: TP, channels: Any) -> Callable[[Message], Awaitable[None]]:
            if tp.topic != self._topic or len(channels) != 1:
                faust_handler: Callable[[Message], Awaitable[None]] = build(tp, channels)
                return faust_handler  # not ours, or shared: faust's own delivery
            (channel,) = channels
            return self._handler(channel.queue)

        conductor._build_handler = build_handler

    def _handler(self, queue: Any) -> Callable[[Message], Awaitable[None]]:
        self._forget_on_clear(queue)
        acquire_flow = self._app.flow_control.acquire
        producer_ebb = self._app.producer.buffer.wait_until_ebb

        async def on_message(message: Message) -> None:
            await acquire_flow()
            await producer_ebb()
            while self._waiting >= self._limit:
                self._room.clear()
                await self._room.wait()
            batch = self._pending
            if batch is None or batch.generation_id != message.generation_id or len(batch) >= self._batch_max:
                batch = HeartbeatBatch(message.generation_id)
                await queue.put(batch)
                self._pending = batch
            batch.append(message)
            self._waiting += 1

        return on_message

    def _forget_on_clear(self, queue: Any) -> None:
        """faust empties the stream's queue each time its flow resumes (at the end of every
        rebalance's recovery, with no revocation): the batch waiting there is gone with it, so the
        next message must start a new batch, not join one the agent will never take."""
        clear = getattr(queue, "clear", None)
        if clear is None or queue in self._watched:
            return  # a handler is built per partition, all on the agent's one queue

        def clear_and_forget() -> None:
            clear()
            self.reset()

        queue.clear = clear_and_forget
        self._watched.add(queue)

    def taken(self, batch: HeartbeatBatch) -> None:
        """The agent has `batch`: later messages go to a new one."""
        if self._pending is batch:
            self._pending = None
        self._waiting = max(0, self._waiting - len(batch))
        self._room.set()

    def reset(self) -> None:
        """faust cleared the queue (partitions revoked, or its flow resumed): the batches on it are gone."""
        self._pending = None
        self._waiting = 0
        self._room.set()
