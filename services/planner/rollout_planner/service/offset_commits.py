"""The planner's offset commits, sent in the background: nothing waits for them.

An offset commit is a round trip to the group coordinator (10 ms and more on Kafka 4, which lingers
to batch them) and only saves redelivering records the checkpoint already skips. One commit is in
flight at a time; what the batches after it took goes in the next one. A commit that fails is
harmless for the same reason, and a stop gives up one the coordinator does not answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from rollout_common.errors import PermanentError, TransientError
from rollout_common.ports import Consumer, Record

log = logging.getLogger("rollout.planner")


class BackgroundCommits:
    """The planner's consumer with the commits of what it took: the one thing a term holds open."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self._in_flight: asyncio.Task[None] | None = None
        # per partition, the newest record taken since the commit in flight began
        self._pending: dict[tuple[str, int], Record] = {}

    def take(self, records: Sequence[Record]) -> None:
        """Commit past these records soon, after any commit in flight."""
        for record in records:
            held = self._pending.get((record.topic, record.partition))
            if held is None or record.offset > held.offset:
                self._pending[(record.topic, record.partition)] = record
        if self._pending and (self._in_flight is None or self._in_flight.done()):
            self._in_flight = asyncio.create_task(self._commit_pending())

    async def _commit_pending(self) -> None:
        while self._pending:
            records, self._pending = list(self._pending.values()), {}
            try:
                await self.consumer.commit(records)
            except (TransientError, PermanentError) as exc:
                log.warning(
                    "offset commit failed; the records will be skipped when redelivered", extra={"error": str(exc)}
                )

    async def settled(self) -> None:
        """Until every record taken has been committed past (or its commit failed: harmless)."""
        task, self._in_flight = self._in_flight, None
        if task is not None:
            await task

    async def settled_within(self, timeout_s: float) -> None:
        """The last commit, given `timeout_s` (a broker that is down must not hold a stop); then
        whatever is left is given up."""
        task = self._in_flight
        if task is not None:
            await asyncio.wait({task}, timeout=timeout_s)
        await self.drop()

    async def close(self, *, within_s: float) -> None:
        """A stop: the last commit, given `within_s`, then the consumer leaves its group."""
        await self.settled_within(within_s)
        await self.consumer.close()

    async def abandon(self) -> None:
        """Another planner took over: nothing more is committed, and a broker that fails the close
        changes nothing (the group is the new planner's now)."""
        await self.drop()
        with contextlib.suppress(TransientError, PermanentError):
            await self.consumer.close()

    async def drop(self) -> None:
        """Give up the commit in flight and what waits for the next (the consumer is closing): the
        records come again and are skipped by the stored offsets."""
        task, self._in_flight, self._pending = self._in_flight, None, {}
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


__all__ = ["BackgroundCommits"]
