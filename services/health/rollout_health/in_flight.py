"""Heartbeats whose readiness is on its way to the broker, finished in the order they arrived.

The agent does not wait for the broker's acknowledgement of one readiness change before taking
the next heartbeat: it queues the send, and this queue finishes each heartbeat (writes its table
row, acks its event so faust may commit its offset) only once its own send and every earlier one's
are acknowledged. So an offset is never committed before the readiness produced from it is on the
topic, and a row never says "published" before it is (at-least-once: a crash replays the
heartbeats after the last committed offset, and their rows still show what was really published).

A failed send stops the queue: nothing after it is finished, so nothing after it is committed; the
agent raises the failure at its next heartbeat and the worker is restarted (as when it awaited).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Heartbeats in flight per worker before the agent waits for the oldest: bounds memory and the
# replay after a crash, and is far above what one produce round trip lets through.
MAX_IN_FLIGHT = 1_000


@dataclass(frozen=True)
class _Pending:
    delivery: asyncio.Future[Any] | None  # None: nothing was sent for this heartbeat
    finish: Callable[[], object]


class InFlight:
    def __init__(self, limit: int = MAX_IN_FLIGHT) -> None:
        self._queue: deque[_Pending] = deque()
        self._limit = limit
        self.failure: BaseException | None = None

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def full(self) -> bool:
        """`room` would wait."""
        return len(self._queue) >= self._limit and self.failure is None

    def add(self, delivery: asyncio.Future[Any] | None, finish: Callable[[], object]) -> None:
        """Finish this heartbeat once `delivery` and everything queued before it are acknowledged."""
        if delivery is None and not self._queue and self.failure is None:
            finish()  # nothing sent and nothing before it: most heartbeats, finished at once
            return
        self._queue.append(_Pending(delivery, finish))
        if delivery is not None and not delivery.done():
            delivery.add_done_callback(self._drain)
        self._drain()

    async def room(self) -> None:
        """Wait while the queue is full (for its oldest send to be acknowledged)."""
        while len(self._queue) >= self._limit and self.failure is None:
            head = self._queue[0].delivery
            if head is not None:
                await asyncio.wait([head])
            self._drain()

    def check(self) -> None:
        """Raise the send failure that stopped the queue, if any."""
        if self.failure is not None:
            raise self.failure

    def _drain(self, _: object = None) -> None:
        while self._queue and self.failure is None:
            head = self._queue[0]
            if head.delivery is not None:
                if not head.delivery.done():
                    return
                if head.delivery.cancelled():
                    self.failure = asyncio.CancelledError("a readiness send was cancelled")
                    return
                error = head.delivery.exception()
                if error is not None:
                    self.failure = error
                    return
            self._queue.popleft()
            head.finish()
