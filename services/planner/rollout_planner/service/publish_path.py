"""The publish path: a persisted batch's outbox goes to the broker, then the store is told it went.

Nothing is published before its decision is durable (BUS-6): the outbox published here is the one
the checkpoint in the store already holds. A crash after the store write and before the mark
re-publishes the outbox on restart with the same ids, so consumers drop the duplicates (BUS-3).

The mark rides on the planner's next store write (the next batch's journal, the status document,
an idle poll's write or the stop's snapshot) instead of a write of its own: one store round trip
per poll instead of two. Until then a crash re-publishes an outbox that already went out, which
is the same harmless repeat as above.
"""

from __future__ import annotations

import functools

from rollout_common.ports import Bus, Outgoing
from rollout_planner.service.checkpoint import PUBLISHED_KEY, Checkpoint
from rollout_planner.service.lease_keeper import PlannerLease
from rollout_planner.service.retrying import Retrier


class PublishPath:
    """Publishes one term's outboxes; `published` is the last batch whose outbox went out."""

    def __init__(self, *, bus: Bus, lease: PlannerLease, retrier: Retrier, published: int = 0) -> None:
        self._bus = bus
        self._lease = lease
        self._retrier = retrier
        self.published = published
        self._unmarked: dict[str, bytes] = {}

    async def publish(self, checkpoint: Checkpoint) -> None:
        """Publish the checkpoint's outbox unless that already happened; the mark waits for the
        caller's next store write (`take_mark`)."""
        if self.published >= checkpoint.batch or not checkpoint.outbox:
            self.published = checkpoint.batch
            return
        self._lease.check()  # a planner that lost its lease publishes nothing more (BUS-8)
        # All in flight at once: the command waits for no acknowledgement of the progress events
        # before it. A retry sends the whole outbox again (same ids: consumers drop the repeats).
        messages = [Outgoing(topic=m.topic, key=m.key, value=m.value, headers=m.headers) for m in checkpoint.outbox]
        await self._retrier.call(
            f"publish batch {checkpoint.batch}'s outbox", functools.partial(self._bus.publish_many, messages)
        )
        self.published = checkpoint.batch
        self._unmarked = {PUBLISHED_KEY: str(checkpoint.batch).encode()}

    @property
    def mark_pending(self) -> bool:
        return bool(self._unmarked)

    def take_mark(self) -> dict[str, bytes]:
        """The store items that mark the last published outbox (empty when marked already), for the
        caller's next write; taken once."""
        items, self._unmarked = self._unmarked, {}
        return items


__all__ = ["PublishPath"]
