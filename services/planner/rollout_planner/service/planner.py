"""The planner loop: poll, decide once per batch, persist atomically, publish, commit.

The order is what makes at-least-once delivery safe (BUS-3, BUS-6):

1. records already contained in the snapshot (offset below the stored one) are skipped;
   undecodable ones become dead letters (BUS-4), the rest one `EventBatch`;
2. snapshot + offsets + outbox + status go to the store in ONE atomic write;
3. the outbox is published, then marked published;
4. the Kafka offsets are committed.

A crash after 2 re-publishes the outbox on restart (same ids: consumers drop the duplicate); a
crash before 2 loses nothing, the records come again and are decided again from the old snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from rollout_adapters.dead_letter_metrics import DeadLetterMetrics
from rollout_common.commands import Command, StageAdvance, WakeAt
from rollout_common.errors import InvalidInputError, PermanentError, TransientError
from rollout_common.events import Event, EventBatch, WakeUp
from rollout_common.ports import Bus, Consumer, Record, Store
from rollout_common.topics import ALL
from rollout_planner.engine import EngineState, decide
from rollout_planner.engine import snapshot as engine_snapshot
from rollout_planner.service.checkpoint import (
    CHECKPOINT_KEY,
    PUBLISHED_KEY,
    SNAPSHOT_KEY,
    STATUS_KEY,
    Checkpoint,
    IncompatibleSnapshotError,
)
from rollout_planner.service.clock import Clock
from rollout_planner.service.intake import Intake, in_decision_order
from rollout_planner.service.journal import (
    ENGINE_VERSION,
    GAP_REMEDY,
    SNAPSHOT_BATCH_KEY,
    JournalGapError,
    decode_entry,
    encode_entry,
    journal_key,
)
from rollout_planner.service.leadership import LeaseLostError
from rollout_planner.service.lease_keeper import PlannerLease
from rollout_planner.service.metrics import PlannerMetrics
from rollout_planner.service.outbox import Outbox, OutboxMessage
from rollout_planner.service.settings import PlannerSettings
from rollout_planner.service.status_document import encode_status

log = logging.getLogger("rollout.planner")

T = TypeVar("T")
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
        lease: PlannerLease | None = None,
    ) -> None:
        self._bus = bus
        self._store = store
        self._settings = settings
        self._clock = clock
        self._initial_state = initial_state
        self.metrics = metrics or PlannerMetrics()
        self.dead_letters = DeadLetterMetrics(self.metrics.registry)
        self._intake = Intake(prefix=settings.topic_prefix)
        self._consumer: Consumer | None = None
        self._stopping = asyncio.Event()
        self.ready = False
        self.lease = lease or PlannerLease(store, ttl_s=settings.lease_ttl_s, retry_s=settings.lease_retry_s)
        self._new_term()

    def _new_term(self) -> None:
        """Forget everything held in memory: a term starts from the store (after taking the lease)."""
        self._state: EngineState | None = None
        self.checkpoint = Checkpoint()
        self._published = 0
        self._restored = False
        # when the last full snapshot and status document were written (batch number, wall time)
        self._snapshot_batch = 0
        self._snapshot_wall = time.monotonic()
        self._status_wall = float("-inf")

    @property
    def state(self) -> EngineState:
        if self._state is None:
            raise PermanentError("the planner has not started")
        return self._state

    # -- life cycle ----------------------------------------------------------------------

    async def start(self) -> bool:
        """Stand by until this planner holds the lease (BUS-8), create topics, restore or build the
        state, finish an interrupted publish; False if stopped first."""
        if not await self.lease.wait_until_held(self._stopping):
            return False
        if self._settings.create_topics:
            specs = [topic.spec(self._settings.topic_prefix) for topic in ALL]
            await self._retrying("create topics", lambda: self._bus.ensure_topics(specs))
        if not await self._restore():
            return False
        await self._flush_outbox()
        # Each assigned partition starts where the checkpoint says, not where the group committed:
        # a Redis restored from an older backup replays what Kafka had already seen committed.
        self._consumer = self._bus.consumer(
            self._intake.topics, group=self._settings.planner_group, start_at=self._checkpointed_offset
        )
        self.ready = True
        log.info("planner started", extra={"batch": self.checkpoint.batch, "wake_at": self.checkpoint.wake_at})
        return True

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
        if self._consumer is not None:
            with contextlib.suppress(TransientError, PermanentError):
                await self._consumer.close()
            self._consumer = None
        self.lease = PlannerLease(
            self._store, ttl_s=self._settings.lease_ttl_s, retry_s=self._settings.lease_retry_s, owner=self.lease.owner
        )
        self._new_term()

    async def _stop_snapshot(self) -> None:
        """A clean stop writes a full snapshot, so the next start replays no journal."""
        if self._state is None or self.checkpoint.batch == self._snapshot_batch:
            return
        try:
            await self._write_snapshot()
        except TransientError as exc:  # the store is down: the journal already holds every batch
            log.warning("no snapshot on stop: the store is unreachable", extra={"error": str(exc)})
            return
        log.info("snapshot written on stop", extra={"batch": self.checkpoint.batch})

    def _checkpointed_offset(self, topic: str, partition: int) -> int | None:
        """Where a partition is read from: the checkpoint's next offset when a snapshot was restored
        (from 0 for a partition it never read), else the group's committed offset."""
        offset = self.checkpoint.next_offset(topic, partition)
        if offset is None and self._restored:
            return 0
        return offset

    async def close(self) -> None:
        self.ready = False
        if self._consumer is not None:
            await self._consumer.close()
            self._consumer = None
        await self.lease.release()

    # -- one batch -----------------------------------------------------------------------

    async def step(self) -> int:
        """Poll once and handle what came (or a due timer); returns how many records were polled."""
        assert self._consumer is not None, "start() first"
        await self.lease.keep()
        await self._flush_outbox()
        try:
            records = await self._consumer.poll(
                max_records=self._settings.poll_max_records, timeout_s=self._poll_timeout()
            )
        except TransientError as exc:
            self.ready = False
            log.warning("poll failed; retrying", extra={"error": str(exc)})
            await self._pause(self._settings.retry_backoff_s)
            return 0
        self.ready = True
        await self.metrics.observe_lag(self._consumer)
        now = self._clock.now()
        due = self.checkpoint.wake_at is not None and self.checkpoint.wake_at <= now
        if not records and not due:
            return 0
        await self._handle(records, now=now, due=due)
        await self._commit(records)
        return len(records)

    async def _handle(self, records: Sequence[Record], *, now: float, due: bool) -> None:
        batch = self.checkpoint.batch + 1
        outbox = Outbox(prefix=self._settings.topic_prefix, source=self._settings.source, batch=batch, at=now)
        events = self._take(records, outbox)
        if not events and not due and not outbox.messages:
            return  # only records the snapshot already holds: nothing to decide or to write
        if due:
            self.checkpoint.wake_at = None  # fired; the engine names the next one, if any
            events.append(WakeUp())
        events = in_decision_order(events)
        self.lease.check()  # a planner that lost its lease decides nothing more (BUS-8)
        commands = self._decide(events, now) if events else []
        outbox.add_commands(commands)
        self._follow_timer(commands)
        self.checkpoint.batch = batch
        self.checkpoint.outbox = outbox.messages
        await self._persist(events, now=now, urgent=_changes_status(commands))
        self._log_commands(commands, batch)
        await self._flush_outbox()

    def _take(self, records: Sequence[Record], outbox: Outbox) -> list[Event]:
        events: list[Event] = []
        for record in records:
            if self.checkpoint.applied(record.topic, record.partition, record.offset):
                self.metrics.duplicates_skipped.inc()
                continue
            try:
                events.append(self._intake.decode(record))
            except InvalidInputError as exc:
                outbox.add_dead_letter(record, str(exc))
                self.metrics.dead_letters.inc()
                self.dead_letters.record(record, reason=str(exc), source=self._settings.source)
            self.checkpoint.advance(record.topic, record.partition, record.offset)
        return events

    def _decide(self, events: list[Event], now: float) -> list[Command]:
        started = time.perf_counter()
        _, commands = decide(self.state, EventBatch(events=tuple(events)), now)
        self.metrics.decision_seconds.observe(time.perf_counter() - started)
        for event in events:
            self.metrics.events_applied.labels(kind=event.kind).inc()
        self.metrics.batches_emitted.inc(sum(isinstance(c, StageAdvance) for c in commands))
        self.metrics.observe_commands(commands)
        return commands

    def _follow_timer(self, commands: Sequence[Command]) -> None:
        # One timer: the latest WakeAt replaces any earlier one.
        for command in commands:
            if isinstance(command, WakeAt):
                self.checkpoint.wake_at = command.at

    def _log_commands(self, commands: Sequence[Command], batch: int) -> None:
        for command in commands:
            if isinstance(command, WakeAt):
                continue
            # Under one key: a command's own field names (message, ...) must not clash with the
            # LogRecord's; the rollout id stays top level so logs can be filtered by it.
            rollout_id = getattr(command, "rollout_id", None)
            details = command.model_dump(mode="json", by_alias=True, exclude={"kind"})
            log.info(command.kind, extra={"batch": batch, "rollout_id": rollout_id, "command": details})

    # -- the store -----------------------------------------------------------------------

    async def _restore(self) -> bool:
        snapshot, checkpoint, published = await self._retrying(
            "read the snapshot", lambda: self._store.get_many([SNAPSHOT_KEY, CHECKPOINT_KEY, PUBLISHED_KEY])
        )
        if snapshot is not None and checkpoint is not None:
            try:
                self._state = engine_snapshot.load(snapshot)
                self.checkpoint = Checkpoint.model_validate_json(checkpoint)
                await self._replay_journal()
            except (ValueError, KeyError, TypeError) as exc:  # JSON and pydantic errors are ValueErrors
                raise IncompatibleSnapshotError(
                    f"the stored snapshot ({self._settings.redis_namespace}:{SNAPSHOT_KEY}) cannot be loaded: "
                    f"{str(exc).splitlines()[0]}"
                ) from exc
            self._published = int(published or 0)
            self._restored = True
            log.info("restored the snapshot", extra={"batch": self.checkpoint.batch})
            return True
        while not self._stopping.is_set():
            state = await self._retrying("build the initial state", self._initial_state)
            if state is not None:
                self._state = state
                await self._write_snapshot()  # the base the journal replays onto after a restart
                return True
            log.info("no sequence to plan yet; waiting for one to be applied")
            await self._pause(self._settings.sequence_wait_s)
        return False

    async def _persist(self, events: list[Event], *, now: float, urgent: bool) -> None:
        """Journal the batch with its checkpoint in one atomic write; snapshot and status when due.

        The journal entry is small whatever the fleet size; the full snapshot (and the status
        document, which also walks the fleet) are written only every so often, or at once when
        a stage or rollout changed state so that `rollout status` is never behind on those.
        """
        batch = self.checkpoint.batch
        items = {
            journal_key(batch): encode_entry(batch=batch, now=now, events=events),
            CHECKPOINT_KEY: self.checkpoint.model_dump_json().encode(),
        }
        wall = time.monotonic()
        if urgent or wall - self._status_wall >= self._settings.status_interval_s:
            items[STATUS_KEY] = encode_status(self.state, batch=batch)
            self._status_wall = wall
        await self._retrying("persist the batch", lambda: self.lease.put_many(items))
        if STATUS_KEY in items:
            self.metrics.observe_status(items[STATUS_KEY])
        self.metrics.last_batch.set(batch)
        if (
            batch - self._snapshot_batch >= self._settings.snapshot_every_batches
            or wall - self._snapshot_wall >= self._settings.snapshot_interval_s
        ):
            await self._write_snapshot()

    async def _write_snapshot(self) -> None:
        """A full snapshot at the current batch, then the journal entries it makes unnecessary go."""
        batch = self.checkpoint.batch
        items = {
            SNAPSHOT_KEY: engine_snapshot.dump(self.state),
            SNAPSHOT_BATCH_KEY: str(batch).encode(),
            CHECKPOINT_KEY: self.checkpoint.model_dump_json().encode(),
        }
        # The journal entries the snapshot makes unnecessary go in the same atomic write.
        trimmed = [journal_key(old) for old in range(self._snapshot_batch, batch + 1)]
        await self._retrying("write the snapshot", lambda: self.lease.put_many(items, delete=trimmed))
        self._snapshot_batch, self._snapshot_wall = batch, time.monotonic()

    async def _replay_journal(self) -> None:
        """Bring the loaded snapshot up to the checkpoint by deciding the journaled batches again."""
        raw_batch = await self._retrying("read the snapshot batch", lambda: self._store.get(SNAPSHOT_BATCH_KEY))
        base = int(raw_batch) if raw_batch is not None else self.checkpoint.batch
        self._snapshot_batch = base
        wanted = list(range(base + 1, self.checkpoint.batch + 1))
        keys = [journal_key(b) for b in wanted]
        stored = await self._retrying("read the journal", lambda: self._store.get_many(keys))
        for batch, data in zip(wanted, stored, strict=True):
            if data is None:
                missing = [b for b, d in zip(wanted, stored, strict=True) if d is None]
                raise JournalGapError(
                    f"the journal misses {len(missing)} batch(es) from {missing[0]} to {missing[-1]} between the "
                    f"snapshot (batch {base}) and the checkpoint (batch {self.checkpoint.batch}): {GAP_REMEDY}"
                )
            entry = decode_entry(data)
            if entry.engine_version != ENGINE_VERSION:
                log.warning(
                    "replaying a batch another engine version decided",
                    extra={"batch": batch, "written_by": entry.engine_version, "replayed_by": ENGINE_VERSION},
                )
            decide(self.state, EventBatch(events=entry.events), entry.now)
        if wanted:
            log.info("replayed the journal", extra={"from_batch": base + 1, "to_batch": self.checkpoint.batch})

    async def _flush_outbox(self) -> None:
        """Publish the last batch's outbox unless that already happened (BUS-6)."""
        if self._published >= self.checkpoint.batch or not self.checkpoint.outbox:
            self._published = self.checkpoint.batch
            return
        self.lease.check()
        for message in self.checkpoint.outbox:
            await self._retrying(f"publish to {message.topic}", functools.partial(self._publish, message))
        batch = self.checkpoint.batch
        published = {PUBLISHED_KEY: str(batch).encode()}
        await self._retrying("mark the outbox published", lambda: self.lease.put_many(published))
        self._published = batch

    async def _publish(self, message: OutboxMessage) -> None:
        await self._bus.publish(message.topic, key=message.key, value=message.value, headers=message.headers)

    async def _commit(self, records: Sequence[Record]) -> None:
        if not records or self._consumer is None:
            return
        try:
            await self._consumer.commit(records)
        except (TransientError, PermanentError) as exc:
            # Harmless: the records come again and are skipped by the stored offsets.
            log.warning("offset commit failed; the records will be skipped when redelivered", extra={"error": str(exc)})

    # -- waiting -------------------------------------------------------------------------

    def _poll_timeout(self) -> float:
        timeout = self._settings.poll_timeout_s
        if self.checkpoint.wake_at is not None:
            timeout = min(timeout, self._clock.wall_seconds_until(self.checkpoint.wake_at))
        # A zero timeout still returns records already fetched, and lets a due timer fire now.
        return max(timeout, 0.0)

    async def _retrying(self, doing: str, call: Callable[[], Awaitable[T]]) -> T:
        """Retry transient failures with capped exponential back-off; permanent ones propagate."""
        delay = self._settings.retry_backoff_s
        while True:
            try:
                return await call()
            except TransientError as exc:
                self.ready = False
                if self._stopping.is_set():
                    raise
                log.warning(
                    "transient failure; retrying", extra={"doing": doing, "error": str(exc), "retry_in_s": delay}
                )
                await self._pause(delay)
                delay = min(delay * 2, self._settings.retry_backoff_max_s)

    async def _pause(self, seconds: float) -> None:
        """Wait, but wake at once when asked to stop."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)


def _changes_status(commands: Sequence[Command]) -> bool:
    """Stage and rollout transitions and acknowledgements must reach the status document at once."""
    return any(c.kind in ("stage_transition", "rollout_transition", "command_ack") for c in commands)


__all__ = ["InitialState", "Planner"]
