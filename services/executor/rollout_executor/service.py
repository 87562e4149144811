"""The executor process's loop: poll a batch, handle it fully, then commit it; stop cleanly.

On SIGTERM the batch in hand gets `shutdown_grace_s` to finish (and is then committed);
after that it is abandoned: its upgrades are cancelled, leases released and nothing committed,
so the group's next owner of the partitions handles it again without double upgrades.
A poll retrying against an unreachable broker is abandoned at once, and closing the clients
is bounded (`rollout_adapters.shutdown.CLOSE_S` each), so SIGTERM ends the process within `shutdown_grace_s` + a few
`CLOSE_S` even with Kafka or Redis down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from rollout_adapters.read_topics import check_read_topics
from rollout_adapters.shutdown import bounded_close, unless_stopped
from rollout_common.errors import TransientError
from rollout_common.ports import Bus, Consumer, Record
from rollout_common.topics.catalog import DEAD_LETTER, STAGE_ADVANCE, UPGRADE_RESULTS
from rollout_executor.executor import Executor
from rollout_executor.retry import retried
from rollout_executor.settings import ExecutorSettings

log = logging.getLogger(__name__)

_POLL_TIMEOUT_S = 1.0


class ExecutorService:
    def __init__(self, settings: ExecutorSettings, *, bus: Bus, executor: Executor) -> None:
        self._settings = settings
        self._bus = bus
        self._executor = executor
        self.ready = False

    async def run(self, stop: asyncio.Event) -> None:
        prefix = self._settings.topic_prefix
        if self._settings.create_topics:
            specs = [self._settings.topic_spec(topic) for topic in (STAGE_ADVANCE, UPGRADE_RESULTS, DEAD_LETTER)]
            await unless_stopped(retried(lambda: self._bus.ensure_topics(specs), what="create topics"), stop)
        await unless_stopped(retried(self._check_topics, what="check the topics it reads"), stop)
        consumer = self._bus.consumer(
            [prefix + STAGE_ADVANCE.name], group=self._settings.group(self._settings.group_id)
        )
        try:
            await self._loop(consumer, stop)
        finally:
            self.ready = False
            await bounded_close("the consumer", consumer.close())

    async def _check_topics(self) -> None:
        await check_read_topics(self._bus, self._settings, [STAGE_ADVANCE], reader="executor")

    async def _loop(self, consumer: Consumer, stop: asyncio.Event) -> None:
        max_records = self._settings.batch_max_records
        while not stop.is_set():
            records = await unless_stopped(
                retried(lambda: consumer.poll(max_records=max_records, timeout_s=_POLL_TIMEOUT_S), what="poll"), stop
            )
            if records is None:
                return
            self.ready = True
            if not records:
                continue
            if not await self._handled(records, stop):
                log.warning("shutdown: abandoned a batch of %d command(s), not committed", len(records))
                return
            await self._commit(consumer, records)

    async def _handled(self, records: list[Record], stop: asyncio.Event) -> bool:
        """True once the batch is done; False when shutdown cut it short."""
        batch = asyncio.create_task(self._executor.handle_batch(records))
        stopping = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({batch, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not batch.done():
                log.info("shutdown: giving the batch in hand %.0f s to finish", self._settings.shutdown_grace_s)
                await asyncio.wait({batch}, timeout=self._settings.shutdown_grace_s)
            if not batch.done():
                batch.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await batch
                return False
            batch.result()  # a failure propagates: nothing committed, the process exits
            return True
        finally:
            stopping.cancel()
            if not batch.done():
                batch.cancel()

    async def _commit(self, consumer: Consumer, records: list[Record]) -> None:
        try:
            await consumer.commit(records)
        except TransientError as exc:
            # A rebalance took the partitions: the new owner gets the batch again and only
            # re-publishes the results recorded here.
            log.warning("commit failed, the batch will be redelivered: %s", exc)
