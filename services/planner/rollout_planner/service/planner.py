"""The planner service: its terms as the lease holder, and the poll loop of each term.

The order within a batch is what makes at-least-once delivery safe (BUS-3, BUS-6):

1. records already contained in the stored state (offset below the checkpoint's) are skipped;
   undecodable ones become dead letters (BUS-4), the rest one `EventBatch` (`batch_decision`);
2. the batch's journal entry, checkpoint and outbox go to the store in ONE atomic write
   (`durable_state`);
3. the outbox is published, then marked published with the status document when due
   (`publish_path`, `status_writer`): the document is encoded after the commands went out;
4. the Kafka offsets are committed, in the background (the next poll does not wait for it).

A crash after 2 re-publishes the outbox on restart (same ids: consumers drop the duplicate); a
crash before 2 loses nothing, the records come again and are decided again from the stored state.
A term starts when this planner takes the lease (BUS-8) and ends when it stops or loses it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from rollout_adapters.dead_letter_metrics import DeadLetterMetrics
from rollout_adapters.read_topics import check_read_topics
from rollout_common.commands import Command
from rollout_common.errors import PermanentError, TransientError
from rollout_common.events import Event, EventBatch, WakeUp
from rollout_common.ports import Bus, Consumer, Record, Store
from rollout_common.sequence import Sequence as SequenceSpec
from rollout_common.topics import ALL
from rollout_planner.engine import EngineState
from rollout_planner.engine import decide as engine_decide
from rollout_planner.service.batch_decision import BatchDecision, Taken, follow_timer, log_commands
from rollout_planner.service.checkpoint import SEQUENCE_KEY, STATUS_KEY, Checkpoint
from rollout_planner.service.clock import Clock
from rollout_planner.service.durable_state import DurableState
from rollout_planner.service.intake import INPUT_TOPICS, Intake, in_decision_order
from rollout_planner.service.leadership import LeaseLostError
from rollout_planner.service.lease_keeper import PlannerLease
from rollout_planner.service.metrics import PlannerMetrics
from rollout_planner.service.offset_commits import BackgroundCommits
from rollout_planner.service.outbox import Outbox
from rollout_planner.service.publish_path import PublishPath
from rollout_planner.service.quarantine import Decide, describe
from rollout_planner.service.retrying import Retrier
from rollout_planner.service.set_aside import SetAside
from rollout_planner.service.settings import PlannerSettings
from rollout_planner.service.status_writer import StatusWriter, changes_status

log = logging.getLogger("rollout.planner")

# How long a stop waits for the offset commit in flight before giving it up (harmless: the records
# come again and are skipped by the stored offsets).
COMMIT_ON_CLOSE_S = 5.0
# Turns of the loop the store's client takes from a write's call to its socket: redis-py's asyncio
# client looks at the connection (a turn) before it sends. Held by a test on a real server.
TURNS_TO_SEND_A_WRITE = 2

# Builds the engine state when the store holds no snapshot yet; returns None while there is
# nothing to plan (no sequence applied), and is asked again later.
InitialState = Callable[[], Awaitable[EngineState | None]]


class Planner:
    def __init__(
        self,
        *,
        bus: Bus,
        store: Store,
        settings: PlannerSettings,
        clock: Clock,
        initial_state: InitialState,
        metrics: PlannerMetrics | None = None,
        decide: Decide = engine_decide,
        lease: PlannerLease | None = None,
        lease_store: Callable[[], Store] | None = None,
    ) -> None:
        self._bus = bus
        self._store = store
        self._lease_store = lease_store
        self._settings = settings
        self._clock = clock
        self._initial_state = initial_state
        self._given_decide = decide
        self.metrics = metrics or PlannerMetrics()
        self.dead_letters = DeadLetterMetrics(self.metrics.registry)
        self._stopping = asyncio.Event()
        self._retrier = self._new_retrier()
        self._decision = self._batch_decision()
        self._set_aside = self._new_set_aside()
        # the term's consumer and its commits; None while standing by
        self._intake: BackgroundCommits | None = None
        self.ready = False
        self.lease = lease or self._new_lease()
        self._new_term()

    def _new_retrier(self) -> Retrier:
        return Retrier(
            backoff_s=self._settings.retry_backoff_s,
            backoff_max_s=self._settings.retry_backoff_max_s,
            stopping=self._stopping,
            on_failure=self._not_ready,
        )

    def _new_set_aside(self) -> SetAside:
        return SetAside(
            decide=self._engine_decide,
            metrics=self.metrics,
            dead_letters=self.dead_letters,
            source=self._settings.source,
        )

    def _batch_decision(self) -> BatchDecision:
        settings = self._settings
        return BatchDecision(
            intake=Intake(prefix=settings.topic_prefix, max_future_skew_s=settings.max_future_skew_s),
            decide=self._engine_decide,
            metrics=self.metrics,
            dead_letters=self.dead_letters,
            source=settings.source,
        )

    def _new_term(self) -> None:
        """Forget everything held in memory: a term starts from the store (after taking the lease)."""
        self._state: EngineState | None = None
        self.checkpoint = Checkpoint()
        self._restored = False
        self._durable = DurableState(
            store=self._store,
            lease=self.lease,
            settings=self._settings,
            retrier=self._retrier,
            decide=self._engine_decide,
        )
        self._publish_path = PublishPath(bus=self._bus, lease=self.lease, retrier=self._retrier)
        self._status = StatusWriter(interval_s=self._settings.status_interval_s, metrics=self.metrics)
        self._prefetched: Taken | None = None  # the next poll, decoded while a batch was written
        self._stored_sequence: SequenceSpec | None = None  # written with the term's first batch, then on a change

    @property
    def mark_pending(self) -> bool:
        """Whether the last outbox went out and the store does not say so yet (it rides on the next write)."""
        return self._publish_path.mark_pending

    @property
    def state(self) -> EngineState:
        if self._state is None:
            raise PermanentError("the planner has not started")
        return self._state

    def _not_ready(self) -> None:
        self.ready = False

    # -- life cycle and the lease --------------------------------------------------------

    async def start(self) -> bool:
        """Stand by until this planner holds the lease (BUS-8), create and check topics, restore or
        build the state, finish an interrupted publish; False if stopped first."""
        if not await self.lease.wait_until_held(self._stopping):
            return False
        self.lease.start_renewing()
        await self._prepare_topics()
        if not await self._restore():
            return False
        await self._flush_outbox()
        # Each assigned partition starts where the checkpoint says, not where the group committed:
        # a Redis restored from an older backup replays what Kafka had already seen committed.
        consumer = self._bus.consumer(
            self._decision.intake.topics,
            group=self._settings.group(self._settings.planner_group),
            start_at=self._checkpointed_offset,
        )
        self._intake = BackgroundCommits(consumer)
        self.ready = True
        log.info("planner started", extra={"batch": self.checkpoint.batch, "wake_at": self.checkpoint.wake_at})
        return True

    async def _prepare_topics(self) -> None:
        if self._settings.create_topics:
            specs = [self._settings.topic_spec(topic) for topic in ALL]
            await self._retrier.call("create topics", lambda: self._bus.ensure_topics(specs))
        await self._retrier.call(
            "check the topics it reads",
            lambda: check_read_topics(self._bus, self._settings, INPUT_TOPICS, reader="planner"),
        )

    async def run(self) -> None:
        """Start, then handle batches until `stop()`; a lost lease sends the planner back to standby."""
        try:
            while not self._stopping.is_set():
                try:
                    await self._term()
                except LeaseLostError as exc:
                    await self._back_to_standby(exc)
        finally:
            await self.close()

    async def _term(self) -> None:
        """One term as the active planner: from taking the lease to a clean stop."""
        if not await self.start():
            return
        while not self._stopping.is_set():
            await self.step()
        await self._stop_snapshot()

    def stop(self) -> None:
        self._stopping.set()

    async def _back_to_standby(self, lost: LeaseLostError) -> None:
        """Another planner is active (or ours lapsed): drop the consumer and all state held in
        memory, and stand by again; the next term restores whatever the active one wrote."""
        log.warning("back to standby", extra={"reason": str(lost)})
        self.metrics.lease_lost.inc()
        self.ready = False
        await self.lease.stop_renewing()
        intake, self._intake = self._intake, None
        if intake is not None:
            await intake.abandon()
        self.lease = self._new_lease(owner=self.lease.owner)
        self._new_term()

    def _new_lease(self, *, owner: str | None = None) -> PlannerLease:
        return PlannerLease(
            self._store,
            ttl_s=self._settings.lease_ttl_s,
            retry_s=self._settings.lease_retry_s,
            owner=owner,
            renewal_store=self._lease_store,
            max_stall_s=self._settings.lease_max_stall_s,
        )

    async def _restore(self) -> bool:
        restored = await self._durable.load()
        if restored is not None:
            self._state, self.checkpoint = restored.state, restored.checkpoint
            self._publish_path.published = restored.published
            self._restored = True
            log.info("restored the snapshot", extra={"batch": self.checkpoint.batch})
            return True
        while not self._stopping.is_set():
            state = await self._retrier.call("build the initial state", self._initial_state)
            if state is not None:
                # The state as of now: until its first decision, the status document describes it
                # at this time (not at the epoch).
                state.now = self._clock.now()
                self._state = state
                await self._write_snapshot()  # the base the journal replays onto after a restart
                return True
            log.info("no sequence to plan yet; waiting for one to be applied")
            await self._retrier.pause(self._settings.sequence_wait_s)
        return False

    async def _stop_snapshot(self) -> None:
        """A clean stop writes a full snapshot, so the next start replays no journal."""
        if self._state is None:
            return
        if self.checkpoint.batch == self._durable.snapshot_batch:
            await self._mark_on_stop()
            return
        try:
            await self._write_snapshot()
        except TransientError as exc:  # the store is down: the journal already holds every batch
            log.warning("no snapshot on stop: the store is unreachable", extra={"error": str(exc)})
            return
        log.info("snapshot written on stop", extra={"batch": self.checkpoint.batch})

    async def _mark_on_stop(self) -> None:
        """A clean stop leaves no published outbox unmarked (it would go out again at the next start)."""
        if not self._publish_path.mark_pending:
            return
        try:
            await self._durable.write(self._publish_path.take_mark(), doing="mark the outbox published")
        except TransientError as exc:
            log.warning("outbox not marked published on stop: the store is unreachable", extra={"error": describe(exc)})

    def _checkpointed_offset(self, topic: str, partition: int) -> int | None:
        """Where a partition is read from: the checkpoint's next offset when a snapshot was restored
        (from 0 for a partition it never read), else the group's committed offset."""
        offset = self.checkpoint.next_offset(topic, partition)
        if offset is None and self._restored:
            return 0
        return offset

    async def close(self) -> None:
        self.ready = False
        intake, self._intake = self._intake, None
        if intake is not None:
            await intake.close(within_s=COMMIT_ON_CLOSE_S)
        await self.lease.release()

    # -- the poll loop -------------------------------------------------------------------

    async def step(self) -> int:
        """Poll once (or take the poll decoded during the last write) and handle what came, or a due
        timer; returns how many records were handled. The batch is published when it returns."""
        intake = self._started_intake()
        await self.lease.keep()
        await self._flush_outbox()
        taken, self._prefetched = self._prefetched, None
        if taken is None:
            records = await self._poll(intake.consumer, self._poll_timeout())
            if records is None:
                await self._retrier.pause(self._settings.retry_backoff_s)
                return 0
            taken = self._decision.decode(records, self.checkpoint, now=self._clock.now())
        now = self._clock.now()
        due = self.checkpoint.wake_at is not None and self.checkpoint.wake_at <= now
        if not taken.records and not due:
            await self._status_if_behind()
            return 0
        await self._handle(taken, now=now, due=due)
        intake.take(taken.records)
        return len(taken.records)

    def _started_intake(self) -> BackgroundCommits:
        if self._intake is None:
            raise PermanentError("the planner has not started: no consumer")
        return self._intake

    async def _poll(self, consumer: Consumer, timeout_s: float) -> list[Record] | None:
        """The next records; None when the broker failed (the planner is not ready meanwhile)."""
        try:
            records = await consumer.poll(max_records=self._settings.poll_max_records, timeout_s=timeout_s)
        except TransientError as exc:
            self.ready = False
            log.warning("poll failed; retrying", extra={"error": str(exc)})
            return None
        self.ready = True
        await self.metrics.observe_lag(consumer)
        return records

    async def _handle(self, taken: Taken, *, now: float, due: bool) -> None:
        batch = self.checkpoint.batch + 1
        outbox = Outbox(prefix=self._settings.topic_prefix, source=self._settings.source, batch=batch, at=now)
        events = self._decision.admit(taken, self.checkpoint, outbox)
        if not events and not due and not outbox.messages:
            return  # only records the stored state already holds: nothing to decide or to write
        if due:
            self.checkpoint.wake_at = None  # fired; the engine names the next one, if any
            events.append(WakeUp())
        events = in_decision_order(events)
        self.lease.check()  # a planner that lost its lease decides nothing more (BUS-8)
        unknown_before = self.state.unknown.events
        commands, events = await self._decide_or_set_aside(events, now, outbox) if events else ([], events)
        self._count_unknown(since=unknown_before)
        outbox.add_commands(commands)
        follow_timer(self.checkpoint, commands)
        self.checkpoint.batch = batch
        self.checkpoint.outbox = outbox.messages
        await self._persist_and_prefetch(events, now=now)
        log_commands(commands, batch)
        await self._flush_outbox(urgent=changes_status(commands))
        # Only after the publish: a full snapshot compacts the journal (tens of ms at 1k clusters,
        # far more at scale) and the decision is already durable without it, so it must not sit
        # between an event and the commands it caused.
        if self._durable.snapshot_due(batch):
            await self._write_snapshot()

    async def _persist_and_prefetch(self, events: list[Event], *, now: float) -> None:
        """Write the batch durably and, while the store works, poll and decode the next records
        (decoding touches no state: the next batch is decided only after this one is published)."""
        write = asyncio.create_task(self._persist(events, now=now))
        try:
            # The write must reach the store's socket before the decoding it is there to overlap,
            # which holds the loop: without these turns the task would start at `await write`.
            for _ in range(TURNS_TO_SEND_A_WRITE):
                if write.done():
                    break
                await asyncio.sleep(0)
            records = await self._poll(self._started_intake().consumer, 0.0)
            if records:
                self._prefetched = self._decision.decode(records, self.checkpoint, now=self._clock.now())
        finally:
            await write

    def _engine_decide(self, state: EngineState, batch: EventBatch, now: float) -> tuple[EngineState, list[Command]]:
        # the engine keeps what its unknown-cluster notices said (in the snapshot); how often it may
        # say a name again is this planner's setting
        state.unknown.interval_s = self._settings.unknown_notice_interval_s
        return self._given_decide(state, batch, now)

    def _count_unknown(self, *, since: int) -> None:
        """Events about unknown clusters counted (the engine says each name once per period)."""
        unknown = self.state.unknown
        self.metrics.unknown_cluster_events.inc(max(0, unknown.events - since))  # a counter never goes down
        self.metrics.unknown_clusters.set(len(unknown.said))

    def _decide(self, events: list[Event], now: float) -> list[Command]:
        return self._decision.decide(self.state, events, now)

    async def _decide_or_set_aside(
        self, events: list[Event], now: float, outbox: Outbox
    ) -> tuple[list[Command], list[Event]]:
        """The batch's commands and the events they were decided from: all, or all but those set aside."""
        try:
            return self._decide(events, now), events
        except Exception as exc:
            log.error("the engine raised on a batch; searching what to set aside", extra={"error": describe(exc)})
            before = await self._durable.stored_state(self.checkpoint)
            self._state, commands, kept = self._set_aside.apply(
                before, events, origin=self._decision.origin, now=now, error=exc, outbox=outbox
            )
            return commands, kept

    async def _persist(self, events: list[Event], *, now: float) -> None:
        """The batch's journal entry and checkpoint in one atomic write: the decision is durable."""
        items = self._durable.journal_items(self.checkpoint, events, now=now)
        sequence = self.state.sequence
        if sequence is not self._stored_sequence:
            # The sequence in force, where the check runner reads each check's query and conditions
            # (and a planner without a snapshot starts from): a change that came from the operator
            # topic or the Kubernetes bridge, not from `rollout apply`, is stored too (CHK-2, SEQ-7).
            items[SEQUENCE_KEY] = sequence.model_dump_json(by_alias=True).encode()
        items.update(self._publish_path.take_mark())
        await self._durable.write(items, doing="persist the batch")
        self._stored_sequence = sequence
        self.metrics.last_batch.set(self.checkpoint.batch)

    async def _flush_outbox(self, *, urgent: bool = False) -> None:
        """Publish the last batch's outbox unless that already happened (BUS-6); when the status
        document is due, write it with the outbox's mark. Otherwise the mark waits for the next
        store write (`PublishPath.take_mark`)."""
        batch = self.checkpoint.batch
        await self._publish_path.publish(self.checkpoint)
        if self._status.due(batch, urgent=urgent):
            await self._write_status(batch)

    async def _status_if_behind(self) -> None:
        """With nothing to decide, bring a status document the throttle left behind up to date, or
        at least mark the last outbox published, so an idle planner leaves nothing to re-publish."""
        batch = self.checkpoint.batch
        if self._state is None:
            return
        if self._status.behind(batch):
            await self._write_status(batch)
        elif self._publish_path.mark_pending:
            await self._durable.write(self._publish_path.take_mark(), doing="mark the outbox published")

    async def _write_status(self, batch: int) -> None:
        document = self._status.encode(self.state, batch)
        items = {**self._publish_path.take_mark(), STATUS_KEY: document}
        await self._durable.write(items, doing="write the status")
        self._status.written(batch, document)

    async def _write_snapshot(self) -> None:
        await self._durable.write_snapshot(self.state, self.checkpoint, also=self._publish_path.take_mark())

    async def commits_settled(self) -> None:
        """Until every batch's offsets have been committed (or the commit failed: harmless)."""
        if self._intake is not None:
            await self._intake.settled()

    def _poll_timeout(self) -> float:
        timeout = self._settings.poll_timeout_s
        if self.checkpoint.wake_at is not None:
            timeout = min(timeout, self._clock.wall_seconds_until(self.checkpoint.wake_at))
        # A zero timeout still returns records already fetched, and lets a due timer fire now.
        return max(timeout, 0.0)


__all__ = ["InitialState", "Planner"]
