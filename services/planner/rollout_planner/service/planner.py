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
import collections
import contextlib
import functools
import logging
import pickle
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar, cast

from rollout_adapters.dead_letter_metrics import DeadLetterMetrics
from rollout_common.commands import Command, StageAdvance, WakeAt
from rollout_common.errors import InvalidInputError, PermanentError, TransientError
from rollout_common.events import Event, EventBatch, WakeUp
from rollout_common.ports import Bus, Consumer, Record, Store
from rollout_common.topics import ALL
from rollout_planner.engine import EngineState
from rollout_planner.engine import decide as engine_decide
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
    JournalReplayError,
    decode_entry,
    encode_entry,
    journal_key,
)
from rollout_planner.service.leadership import LeaseLostError
from rollout_planner.service.lease_keeper import PlannerLease
from rollout_planner.service.metrics import PlannerMetrics
from rollout_planner.service.outbox import Outbox, OutboxMessage
from rollout_planner.service.quarantine import Decide, describe, engine_version, search
from rollout_planner.service.settings import PlannerSettings
from rollout_planner.service.status_document import encode_status

log = logging.getLogger("rollout.planner")

T = TypeVar("T")
# The status document walks the whole fleet (tens of ms at 10k clusters, more on a loaded core):
# outside state changes it is rebuilt at most this share of the time, however short
# status_interval_s is, so a large fleet's status never slows the decisions down.
STATUS_SHARE = 0.05
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
        # the record each event of the current batch came from, to dead-letter it (BUS-9)
        self._origin: dict[int, Record] = {}
        self.metrics = metrics or PlannerMetrics()
        self.dead_letters = DeadLetterMetrics(self.metrics.registry)
        self._intake = Intake(prefix=settings.topic_prefix, max_future_skew_s=settings.max_future_skew_s)
        self._consumer: Consumer | None = None
        self._stopping = asyncio.Event()
        self.ready = False
        self.lease = lease or self._new_lease()
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
        self._status_cost = 0.0  # seconds the last status document took to build
        self._status_batch = -1  # the batch the last status document described

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
        self.lease.start_renewing()
        if self._settings.create_topics:
            specs = [self._settings.topic_spec(topic) for topic in ALL]
            await self._retrying("create topics", lambda: self._bus.ensure_topics(specs))
        if not await self._restore():
            return False
        await self._flush_outbox()
        # Each assigned partition starts where the checkpoint says, not where the group committed:
        # a Redis restored from an older backup replays what Kafka had already seen committed.
        self._consumer = self._bus.consumer(
            self._intake.topics,
            group=self._settings.group(self._settings.planner_group),
            start_at=self._checkpointed_offset,
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
        await self.lease.stop_renewing()
        if self._consumer is not None:
            with contextlib.suppress(TransientError, PermanentError):
                await self._consumer.close()
            self._consumer = None
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
            await self._status_if_behind()
            return 0
        await self._handle(records, now=now, due=due)
        await self._commit(records)
        return len(records)

    async def _handle(self, records: Sequence[Record], *, now: float, due: bool) -> None:
        batch = self.checkpoint.batch + 1
        outbox = Outbox(prefix=self._settings.topic_prefix, source=self._settings.source, batch=batch, at=now)
        events = self._take(records, outbox, now=now)
        if not events and not due and not outbox.messages:
            return  # only records the snapshot already holds: nothing to decide or to write
        if due:
            self.checkpoint.wake_at = None  # fired; the engine names the next one, if any
            events.append(WakeUp())
        events = in_decision_order(events)
        self.lease.check()  # a planner that lost its lease decides nothing more (BUS-8)
        unknown_before = self.state.unknown.events
        commands, events = await self._decide_or_quarantine(events, now, outbox) if events else ([], events)
        self._count_unknown(since=unknown_before)
        outbox.add_commands(commands)
        self._follow_timer(commands)
        self.checkpoint.batch = batch
        self.checkpoint.outbox = outbox.messages
        await self._persist(events, now=now, urgent=_changes_status(commands))
        self._log_commands(commands, batch)
        await self._flush_outbox()
        # Only after the publish: a full snapshot compacts the journal (tens of ms at 1k clusters,
        # far more at scale) and the decision is already durable without it, so it must not sit
        # between an event and the commands it caused.
        await self._snapshot_if_due()

    def _take(self, records: Sequence[Record], outbox: Outbox, *, now: float) -> list[Event]:
        events: list[Event] = []
        self._origin = {}
        for record in records:
            if self.checkpoint.applied(record.topic, record.partition, record.offset):
                self.metrics.duplicates_skipped.inc()
                continue
            try:
                events.append(self._intake.decode(record, now=now))
                self._origin[id(events[-1])] = record
            except InvalidInputError as exc:
                outbox.add_dead_letter(record, str(exc))
                self.metrics.dead_letters.inc()
                self.dead_letters.record(record, reason=str(exc), source=self._settings.source)
            self.checkpoint.advance(record.topic, record.partition, record.offset)
        return events

    def _decide(self, events: list[Event], now: float) -> list[Command]:
        started = time.perf_counter()
        _, commands = self._engine_decide(self.state, EventBatch(events=tuple(events)), now)
        self.metrics.decision_seconds.observe(time.perf_counter() - started)
        # one counter update per kind, not per event: a label lookup costs about as much as decoding
        for kind, count in collections.Counter(event.kind for event in events).items():
            self.metrics.events_applied.labels(kind=kind).inc(count)
        self.metrics.batches_emitted.inc(sum(isinstance(c, StageAdvance) for c in commands))
        self.metrics.observe_commands(commands)
        return commands

    async def _decide_or_quarantine(
        self, events: list[Event], now: float, outbox: Outbox
    ) -> tuple[list[Command], list[Event]]:
        """The batch's commands and the events they were decided from: all, or all but those set aside."""
        try:
            return self._decide(events, now), events
        except Exception as exc:
            return await self._quarantine(events, now, outbox, exc)

    async def _quarantine(
        self, events: list[Event], now: float, outbox: Outbox, error: Exception
    ) -> tuple[list[Command], list[Event]]:
        """BUS-9: from the state before the batch, set aside the events that make the engine raise."""
        log.error("the engine raised on a batch; searching it for what to set aside", extra={"error": describe(error)})
        before = await self._stored_state()
        # Trial copies via pickle (in memory, our own objects only): about 4 times faster than a
        # snapshot load, which validates every record.
        frozen = pickle.dumps(before, protocol=pickle.HIGHEST_PROTOCOL)
        copies = [before]

        def fresh() -> EngineState:
            return copies.pop() if copies else cast(EngineState, pickle.loads(frozen))

        found = search(
            decide=self._engine_decide,
            fresh=fresh,
            events=[e for e in events if id(e) in self._origin],
            fixed=[e for e in events if id(e) not in self._origin],
            now=now,
            error=error,
        )
        self._state = found.state
        version = engine_version()
        for rejected in found.rejected:
            record = self._origin[id(rejected.event)]
            cause = describe(rejected.error)
            reason = f"quarantined: the planner's decision raised {cause} on this {rejected.event.kind} event (BUS-9)"
            outbox.add_dead_letter(record, reason, extra={"dlq_error": cause, "dlq_engine_version": version})
            self.metrics.dead_letters.inc()
            self.metrics.quarantined.labels(kind=rejected.event.kind).inc()
            self.dead_letters.record(record, reason=reason, source=self._settings.source)
            log.error("event set aside", extra={"kind": rejected.event.kind, "error": cause, "offset": record.offset})
        for event in found.applied:
            self.metrics.events_applied.labels(kind=event.kind).inc()
        self.metrics.batches_emitted.inc(sum(isinstance(c, StageAdvance) for c in found.commands))
        self.metrics.observe_commands(found.commands)
        return found.commands, [e for e in events if not any(e is r.event for r in found.rejected)]

    async def _stored_state(self) -> EngineState:
        """The state before the current batch, as a restart would rebuild it: snapshot plus journal."""
        snapshot = await self._retrying("read the snapshot", lambda: self._store.get(SNAPSHOT_KEY))
        if snapshot is None:
            where = f"{self._settings.redis_namespace}:{SNAPSHOT_KEY}"
            raise PermanentError(f"no stored snapshot ({where}) to rebuild the state from")
        self._state = engine_snapshot.load(snapshot)
        await self._replay_journal()
        return self._state

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
        """Journal the batch with its checkpoint in one atomic write, with the status document when due.

        The journal entry is small whatever the fleet size; the status document, which walks the
        fleet, is written only every so often, or at once when a stage or rollout changed state so
        that `rollout status` is never behind on those. The full snapshot follows the publish.
        """
        batch = self.checkpoint.batch
        items = {
            journal_key(batch): encode_entry(batch=batch, now=now, events=events),
            CHECKPOINT_KEY: self.checkpoint.model_dump_json().encode(),
        }
        wall = time.monotonic()
        if urgent or wall - self._status_wall >= max(
            self._settings.status_interval_s, self._status_cost / STATUS_SHARE
        ):
            items[STATUS_KEY] = self._status_document(batch, started=wall)
        await self._retrying("persist the batch", lambda: self.lease.put_many(items))
        if STATUS_KEY in items:
            self._status_batch = batch
            self.metrics.observe_status(items[STATUS_KEY])
        self.metrics.last_batch.set(batch)

    def _status_document(self, batch: int, *, started: float) -> bytes:
        document = encode_status(self.state, batch=batch)
        self._status_cost = time.monotonic() - started
        self._status_wall = started
        return document

    async def _status_if_behind(self) -> None:
        """With nothing to decide, bring a status document the throttle left behind up to date:
        under a steady stream of a large fleet's events it is rebuilt only every so often, and a
        planner that has caught up must not leave `rollout status` describing an older batch."""
        batch = self.checkpoint.batch
        if self._state is None or self._status_batch >= batch:
            return
        wall = time.monotonic()
        if wall - self._status_wall < self._settings.status_interval_s:
            return
        document = self._status_document(batch, started=wall)
        await self._retrying("write the status", lambda: self.lease.put_many({STATUS_KEY: document}))
        self._status_batch = batch
        self.metrics.observe_status(document)

    async def _snapshot_if_due(self) -> None:
        if (
            self.checkpoint.batch - self._snapshot_batch >= self._settings.snapshot_every_batches
            or time.monotonic() - self._snapshot_wall >= self._settings.snapshot_interval_s
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
            self._replay_entry(batch, data)
        if wanted:
            log.info("replayed the journal", extra={"from_batch": base + 1, "to_batch": self.checkpoint.batch})

    def _replay_entry(self, batch: int, data: bytes) -> None:
        """Decide one journaled batch again; a failure is reported as the journal's, not the snapshot's."""
        try:
            entry = decode_entry(data)
        except ValueError as exc:
            raise JournalReplayError(
                f"the journal entry of batch {batch} cannot be read ({describe(exc)}); it was written by another "
                "version of the planner, or damaged: see 'Journal replay failed' in docs/operations.md"
            ) from exc
        if entry.engine_version != ENGINE_VERSION:
            log.warning(
                "replaying a batch another engine version decided",
                extra={"batch": batch, "written_by": entry.engine_version, "replayed_by": ENGINE_VERSION},
            )
        try:
            self._engine_decide(self.state, EventBatch(events=entry.events), entry.now)
        except Exception as exc:
            raise JournalReplayError(
                f"replaying the journal's batch {batch} raised {describe(exc)} in engine {engine_version()}: this "
                "engine cannot apply events an earlier planner applied; see 'Journal replay failed' in "
                "docs/operations.md"
            ) from exc

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
