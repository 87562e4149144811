"""The health monitor: a faust app turning heartbeats into readiness changes.

- Agent (concurrency 1: faust 0.15 can commit past an unfinished event with more): takes the raw
  heartbeat records faust fetched while it was busy, as one batch (`heartbeat_inbox`: not one
  faust event per record), decodes them with the CloudEvents envelope (a bad one is dead-lettered,
  never crashes the agent), and publishes a Readiness on change. A heartbeat that changes nothing
  (a fleet at rest) only moves its cluster's last-seen time, kept in memory: the row, and its
  changelog record, is written on a change and once per `checkpoint_interval_s` per cluster, at
  a point of the interval of its own (`checkpoint_due`), so rows first written together are not
  written together again.
  It does not wait for the broker's ack of each change before the next heartbeat: the agent tracks
  and acks each record itself, and `InFlight` writes a heartbeat's row and acks its record only
  once its readiness and every earlier one is acknowledged, so faust commits no offset ahead of
  what was published.
- Table `cluster-health`: {ready, last_seen, last_published, the versions last published} per
  cluster, changelog-backed in Kafka, so a restarted monitor neither forgets nor re-announces what it published.
- Timer: every `check_interval_s`, a cluster silent for `staleness_limit_s` is published not
  ready ("stale: no heartbeat for N s"); one silent for `row_expiry_s` loses its row. Silence is
  counted up to the time this worker has read its partitions to (`read_through`): a worker behind
  does not call stale a cluster whose heartbeat waits in its backlog. A cluster
  this worker has not heard from since it took
  the partition may have been seen by the previous owner up to `checkpoint_interval_s` after its
  row's time (a row is checkpointed, and an offset is committed only once the heartbeats before it
  are within that of their rows): its silence counts from the row's time plus that, so a takeover
  neither calls a cluster stale early nor, since the row's time is fixed, keeps it fresh.
  A tick judges only the rows whose silence could be due by now, that changed since the last
  tick, or whose republish turn it is (`silence_schedule`); all of them after a rebalance.

A row's changelog partition is the one Kafka's default partitioner gives its cluster name, as
for the heartbeats (keyed by cluster): the timer writes outside any event, where faust cannot
borrow the event's partition. Standby replicas are off, so a worker's timer only sees (and
writes) rows of partitions it owns.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from functools import partial
from typing import Any, cast

import faust
from faust.types import TP, CodecArg, Message
from faust.types.transports import TransportT
from mode import ServiceT

from rollout_adapters import faust_message_dispatch, faust_uncommitted_seek, kafka_fetcher_close, kafka_records
from rollout_adapters.faust_changelog_batch import ChangelogBatch
from rollout_adapters.faust_commit_gap import install as rewind_commit_gaps
from rollout_adapters.faust_credentials import broker_credentials
from rollout_adapters.faust_fetch_wait import FetchWait, FetchWaitTransport
from rollout_adapters.faust_msgspec_json import MsgspecJson
from rollout_adapters.faust_read_position import committed_offset, highwater
from rollout_adapters.memory_bus import kafka_partition
from rollout_common.dead_letters import dead_letter
from rollout_common.envelope import decode, encode
from rollout_common.errors import InvalidInputError
from rollout_common.events import Readiness
from rollout_common.heartbeat import Heartbeat
from rollout_common.ports import Record
from rollout_common.topics.catalog import DEAD_LETTER, HEARTBEATS, READINESS
from rollout_health.cluster_health import (
    ClusterHealth,
    after_heartbeat,
    after_silence,
    changes_nothing,
    checkpoint_due,
    name_hash,
)
from rollout_health.faust_topics import changelog_configs
from rollout_health.heartbeat_inbox import HeartbeatBatch, HeartbeatInbox
from rollout_health.in_flight import InFlight
from rollout_health.metrics import HealthMetrics
from rollout_health.outbox import FaustOutbox, Outbox
from rollout_health.partition_check import TABLE_NAME
from rollout_health.read_through import PartitionRead, judged_until
from rollout_health.settings import MonitorSettings
from rollout_health.silence_schedule import SilenceSchedule

log = logging.getLogger(__name__)

Clock = Callable[[], float]


# A stopping worker's steps that wait on the broker have no bound in faust: the wait for every event
# to be acked (ours are acked once their readiness is acknowledged), the producer's flush (an
# idempotent producer never gives a batch up), the consumer's last commit. With the broker down,
# SIGTERM hung the worker until its supervisor killed it (20 s). What was not committed is read
# again by the next worker, as after a crash, so a stop may give them up.
STOP_BOUND_S = 5.0


def _exit_stopping() -> None:
    log.warning("stopping: the broker has not answered for %.0f s; exiting without its last commit", STOP_BOUND_S)
    for handler in logging.getLogger().handlers:
        handler.flush()
    os._exit(0)  # a stop that was asked for: what was not committed is read again


class MonitorApp(faust.App):
    """faust's app, whose stop ends within `STOP_BOUND_S` whether the broker answers or not, which
    keeps no per-message statistics unless its web page is served, and whose consumer's fetches wait
    for `fetch_wait` (`faust_fetch_wait`)."""

    fetch_wait: FetchWait | None = None

    def _new_transport(self) -> TransportT:
        return FetchWaitTransport(self.conf.broker_consumer, self)

    def on_init_dependencies(self) -> Iterable[ServiceT]:
        dependencies = super().on_init_dependencies()
        if not self.conf.web_enabled:
            # faust's Monitor sensor counts and times every message, stream event and send for
            # its web page: several calls and dicts per heartbeat that nothing here reads. The
            # consumer still reports commits and end offsets to it directly.
            self.sensors.remove(self.monitor)
        return dependencies

    async def on_stop(self) -> None:
        watchdog = threading.Timer(STOP_BOUND_S, _exit_stopping)
        watchdog.daemon = True
        watchdog.start()
        await super().on_stop()


_TABLE_CODEC = MsgspecJson()


class KeyPartitionedTable(faust.Table[str, dict[str, Any]]):
    """A table whose rows go to the partition of their key, inside or outside an event, written
    and read as JSON by msgspec (the same bytes as faust's `json` codec, at a tenth of its cost)."""

    def _serializer_from_type(self, typ: Any) -> CodecArg:
        return _TABLE_CODEC

    def partition_for_key(self, key: Any) -> int:
        # `partitions` is the heartbeats topic's count: the table is co-partitioned with it
        assert self.partitions is not None  # always given (HealthMonitor)
        return kafka_partition(str(key).encode(), self.partitions)


def _install_client_fixes() -> None:
    """Patches of faust's and aiokafka's consumer, for every consumer of the process."""
    # faust's consumer is aiokafka's: without these, a header name that is not UTF-8 raises in
    # its fetcher on every poll and the worker never reads that partition again (BUS-4), and
    # a SIGTERM with the broker down hangs the worker until its supervisor kills it.
    kafka_records.install()
    kafka_fetcher_close.install()
    # faust rewinds the records it fetched during a rebalance only on partitions with a committed
    # offset: without this, a worker killed before its first commit left its successor to start
    # at the end of the log and never judge the heartbeats in between (BUS-4)
    faust_uncommitted_seek.install()
    rewind_commit_gaps()  # faust never commits a partition again past records it skipped
    # faust made four tasks for every record it handed to the agent's stream
    faust_message_dispatch.install()


def _monitor_app(settings: MonitorSettings) -> MonitorApp:
    app = MonitorApp(
        settings.group(settings.app_id),
        # one URL per host: faust reads "kafka://a:1,b:2" as a single host named "a:1,b:2"
        broker=[f"kafka://{host.strip()}" for host in settings.kafka_bootstrap.split(",") if host.strip()],
        broker_credentials=broker_credentials(settings.kafka_security),
        store=settings.store_url,
        datadir=settings.data_dir,  # None: faust's own, `<app id>-data` in the working directory
        topic_replication_factor=settings.kafka_replication_factor,
        topic_partitions=settings.partitions(HEARTBEATS),
        table_standby_replicas=0,
        producer_linger=0.005,
        # a killed worker's partitions move to its replacement after this, not faust's 60 s:
        # until then nobody turns heartbeats into readiness
        broker_session_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=min(3.0, settings.session_timeout_s / 3),
        # The group's leader assigns from the metadata it has; it looks again only after this, and a
        # changed topic list then makes it rebalance. faust's 5 minutes left a worker that joined
        # while the broker restarted without partitions (no heartbeat judged) for that long.
        consumer_metadata_max_age_ms=round(settings.metadata_max_age_s * 1000),
        web_enabled=settings.web_port > 0,
        web_port=settings.web_port or 6066,
        autodiscover=False,
        # Table rows are JSON objects keyed by the cluster name's bytes (as the topics are).
        key_serializer="raw",
        value_serializer="json",
    )
    app.fetch_wait = FetchWait(
        min_bytes=settings.fetch_min_bytes, max_wait_ms=max(1, round(settings.fetch_max_wait_s * 1000))
    )
    return app


class HealthMonitor:
    def __init__(
        self,
        settings: MonitorSettings,
        *,
        outbox: Outbox | None = None,
        clock: Clock = time.time,
        metrics: HealthMetrics | None = None,
    ) -> None:
        self.metrics = metrics or HealthMetrics()
        self._settings = settings
        self._clock = clock
        _install_client_fixes()
        self.app = _monitor_app(settings)
        self._add_topics(settings)
        self.outbox: Outbox = outbox or FaustOutbox(self.app)
        self._ticks = 0
        self._in_flight = InFlight()
        # rows decided by the agent whose readiness is not acknowledged yet: newer than the table's
        self._unwritten: dict[str, ClusterHealth] = {}
        # Since the last rebalance: each cluster's row as last decided here (the table's, parsed once)
        # and its newest heartbeat's time where that is newer than the row's. Both are forgotten when
        # partitions are revoked: another worker may own them, and see newer heartbeats, meanwhile.
        self._known: dict[str, ClusterHealth] = {}
        self._seen: dict[str, float] = {}
        # which rows the staleness timer looks at on its next tick (not all of them)
        self._schedule = SilenceSchedule()
        # How far this worker has judged each heartbeat partition it owns (`read_through`): the
        # partitions from faust's assignment, and per partition the last offset judged and the
        # newest record time, since it was assigned.
        self._owned: set[TP] = set()
        self._judged: dict[int, tuple[int, float]] = {}
        self.app.on_partitions_revoked.connect(self._forget_owned)
        self.app.on_partitions_assigned.connect(self._note_owned)
        self.agent = self.app.agent(self.heartbeats, name="heartbeats", concurrency=1)(self._process)
        self.app.timer(settings.check_interval_s, name="staleness")(self.check_staleness)

    def _add_topics(self, settings: MonitorSettings) -> None:
        """The topics, the table, and the heartbeats' way to the agent (`heartbeat_inbox`)."""
        prefix = settings.topic_prefix
        partitions = settings.partitions(HEARTBEATS)
        self._heartbeats_topic = prefix + HEARTBEATS.name
        self.heartbeats = self.app.topic(
            self._heartbeats_topic, key_serializer="raw", value_serializer="raw", partitions=partitions
        )
        self._inbox = HeartbeatInbox(self.app, topic=self._heartbeats_topic, batch_max=settings.batch_max_records)
        self._inbox.install()
        self.table = KeyPartitionedTable(
            self.app,
            name=TABLE_NAME,
            partitions=partitions,
            key_type=str,
            extra_topic_configs=changelog_configs(settings),
        )
        self.app.tables.add(self.table)
        self._rows = ChangelogBatch(self.table)
        self.readiness_topic = prefix + READINESS.name
        self.dead_letter_topic = prefix + DEAD_LETTER.name

    async def _process(self, stream: faust.StreamT[bytes]) -> AsyncIterator[list[Readiness | None]]:
        # Values, not events: a `HeartbeatBatch` (the heartbeats topic, see `heartbeat_inbox`) comes as
        # a value with no event of its own; a heartbeat faust delivered itself (another channel, as in
        # a test) as its bytes, with its event current. Not acked by the stream: `InFlight` decides
        # when each heartbeat is finished (StreamT does not declare noack).
        values = cast("faust.Stream[Any]", stream).noack()
        async for value in values:
            if isinstance(value, HeartbeatBatch):
                self._inbox.taken(value)
                # Yielded once a batch (each yield costs faust's agent a round of its own), so a test
                # can wait for its heartbeats to be handled (their sends queued).
                yield await self._on_batch(value)
            else:
                event = values.current_event
                assert event is not None  # a value from a channel of events
                yield [await self._on_message(event.message, finished=event.ack)]

    async def _on_batch(self, batch: HeartbeatBatch) -> list[Readiness | None]:
        app = self.app
        consumer = app.consumer
        results = []
        for message in batch:
            if batch.generation_id != app.consumer_generation_id or not app.flow_control.is_active():
                # fetched before a rebalance: skipped and acked, as faust's stream does (it is fetched
                # again from the committed offset by whoever owns its partition now)
                consumer.ack(message)
                continue
            if not message.tracked:  # a rebalance waits for the messages an agent started
                message.tracked = True
                consumer.track_message(message)
            results.append(await self._on_message(message, finished=partial(consumer.ack, message)))
        return results

    async def _on_message(self, message: Message, *, finished: Callable[[], object]) -> Readiness | None:
        in_flight = self._in_flight
        in_flight.check()
        self._rows.check()
        if self._rows.full:
            await self._rows.room()
            self._rows.check()
        if in_flight.full:
            await in_flight.room()
            in_flight.check()
        record = Record(
            topic=message.topic,
            partition=message.partition,
            offset=message.offset,
            key=message.key,
            value=message.value or b"",
            headers=_header_map(message.headers),
            timestamp_ms=int(message.timestamp * 1000),
        )
        judged = await self.on_record(record, finished=finished)
        newest = self._judged.get(message.partition)
        self._judged[message.partition] = (
            message.offset,
            message.timestamp if newest is None else max(newest[1], message.timestamp),
        )
        return judged

    async def _forget_owned(self, _sender: Any, /, *_: Any, signal: Any, **__: Any) -> None:
        # the rows written so far go to the changelog before the partitions move on
        await self._rows.settled()
        self._inbox.reset()
        self._known.clear()
        self._seen.clear()
        self._owned = set()
        self._judged.clear()
        self._schedule.rescan()

    async def _note_owned(self, _sender: Any, /, *args: Any, signal: Any, **__: Any) -> None:
        (assigned,) = args  # faust's whole new assignment
        self._owned = {tp for tp in assigned if tp.topic == self._heartbeats_topic}
        self._schedule.rescan()  # and once more when the table has recovered the new partitions' rows

    async def on_record(self, record: Record, *, finished: Callable[[], object] = lambda: None) -> Readiness | None:
        """The record judged, its readiness (if any) queued, and its row scheduled. Publishing stays
        outside the dead-letter guard: a broker failure must not turn a good heartbeat into a dead
        letter. `finished` (the event's ack) runs once the record's readiness, if any, and every
        earlier record's are acknowledged, after its row is written."""
        judged = await self._judged_or_dead_letter(record)
        if judged is None or judged[2] is judged[1]:
            # dead-lettered, or nothing to write: a heartbeat that changes nothing, or an old one
            self._in_flight.add(None, finished)
            return None
        cluster, _, state, readiness = judged
        delivery = None if readiness is None else await self._publish(readiness, wait=False)
        self._in_flight.add(delivery, self._row_writer(cluster, state, finished))
        return readiness

    async def _judged_or_dead_letter(
        self, record: Record
    ) -> tuple[str, ClusterHealth | None, ClusterHealth, Readiness | None] | None:
        """Any failure judging one record is that record's dead letter (then None): the agent goes on
        (BUS-4)."""
        try:
            return self._judge(record)
        except InvalidInputError as exc:
            reason = str(exc)
        except Exception as exc:
            log.exception("handling a heartbeat raised; dead-lettered")
            first_line = (str(exc).splitlines() or [""])[0][:500]
            reason = f"quarantined: handling raised {type(exc).__name__}: {first_line}"
        await self._dead_letter(record, reason=reason)
        return None

    def _row_writer(self, cluster: str, state: ClusterHealth, finished: Callable[[], object]) -> Callable[[], None]:
        """`state` is the cluster's row from now on; the table's is written by the function returned,
        which runs once the readiness it says was published is acknowledged."""
        self._unwritten[cluster] = state
        self._known[cluster] = state
        self._seen.pop(cluster, None)  # the row has its time
        self._schedule.look_soon(cluster)

        def write_row() -> None:
            # after the readiness is acknowledged: a row never says "published" before it is
            self._rows.put(cluster, state.model_dump(), done=finished)
            if self._unwritten.get(cluster) is state:
                del self._unwritten[cluster]

        return write_row

    def _judge(self, record: Record) -> tuple[str, ClusterHealth | None, ClusterHealth, Readiness | None]:
        """The heartbeat's cluster, its row before and after, and the readiness to publish if any."""
        _, heartbeat = decode(record.value, record.headers, HEARTBEATS.models)
        assert isinstance(heartbeat, Heartbeat)
        ahead = heartbeat.observed_at - self._clock()
        if ahead > self._settings.max_future_skew_s:
            # It would keep the cluster from ever going stale (BUS-7).
            raise InvalidInputError(
                f"invalid Heartbeat: observedAt is {ahead:.0f} s ahead of the monitor's clock "
                f"(limit max_future_skew_s={self._settings.max_future_skew_s:g}); check the reporter's clock"
            )
        cluster = heartbeat.cluster
        previous = self._row(cluster)
        # The observation's time, not the monitor's nor the record's: a replayed or delayed old
        # heartbeat must not look fresh, and the planner orders readiness by it (BUS-7).
        seen_at = heartbeat.observed_at
        if previous is not None:
            if seen_at < self._seen.get(cluster, previous.last_seen):
                return cluster, previous, previous, None  # older than what we have: it changes nothing
            if changes_nothing(previous, heartbeat):
                if cluster not in self._known:
                    self._schedule.look_soon(cluster)  # its grace ends: its silence may be due sooner
                self._known[cluster] = previous  # heard from since the rebalance (the timer's grace ends)
                self._seen[cluster] = seen_at
                interval_s = self._settings.checkpoint_interval_s
                if not checkpoint_due(cluster, row_seen=previous.last_seen, seen_at=seen_at, interval_s=interval_s):
                    return cluster, previous, previous, None
                return cluster, previous, previous.model_copy(update={"last_seen": seen_at}), None
        state, readiness = after_heartbeat(previous, heartbeat, seen_at=seen_at)
        return cluster, previous, state, readiness

    async def check_staleness(self) -> list[Readiness]:
        now = self._read_through(self._clock())
        published: list[Readiness] = []
        self._ticks += 1
        app, table, schedule = self.app, self.table, self._schedule
        due = schedule.due(
            now=now,
            group=self._republish_turn(),
            everything=table.keys,
            settled=not (app.rebalancing or app.in_recovery),
        )
        self.metrics.rows_looked_at.inc(len(due))
        for cluster in due:
            row = table.get(cluster)
            if row is None:
                schedule.forget(cluster)
            elif cluster in self._unwritten:
                schedule.look_soon(cluster)  # a heartbeat was just judged: its readiness is on its way
            else:
                said = await self._look(cluster, row, now=now)
                if said is not None:
                    published.append(said)
        return published

    async def _look(self, cluster: str, row: Mapping[str, Any], *, now: float) -> Readiness | None:
        """What the timer says of `cluster` now (a stale mark, readiness again, or nothing), and when
        it must look at it next."""
        current, grace, last_seen = self._silence_basis(cluster, row)
        said = None
        due = self._silence_due(cluster, current, grace=grace, last_seen=last_seen, now=now)
        if due is not None:
            state, readiness = after_silence(
                cluster, due, now=now, staleness_limit_s=self._settings.staleness_limit_s, grace_s=grace
            )
            if readiness is not None:
                await self._mark_stale(cluster, state, readiness)
                said = readiness
                current, grace, last_seen = state, 0.0, state.last_seen  # as `_mark_stale` keeps it
            elif due.last_published is not None and self._republish_due(cluster):
                said = await self._say_again(cluster, due)
        if cluster in self.table:  # not expired
            settings = self._settings
            # silent past the limit: a stale mark, unless it was published not ready (then only its expiry)
            wait = settings.staleness_limit_s if current.last_published is not False else settings.row_expiry_s
            self._schedule.later(cluster, at=last_seen + grace + wait, group=self._republish_group(cluster))
        return said

    def _read_through(self, now: float) -> float:
        """The time up to which this worker has read its heartbeat partitions (`read_through`)."""
        consumer = self.app.consumer
        reads = []
        for tp in self._owned:
            judged = self._judged.get(tp.partition)
            reads.append(
                PartitionRead(
                    next_offset=committed_offset(consumer, tp) if judged is None else judged[0] + 1,
                    highwater=highwater(consumer, tp),
                    newest_at=None if judged is None else judged[1],
                )
            )
        read_to = judged_until(now, reads, most_behind_s=self._settings.staleness_limit_s)
        self.metrics.judged_behind.set(now - read_to)
        return read_to

    def _silence_basis(self, cluster: str, row: Mapping[str, Any]) -> tuple[ClusterHealth, float, float]:
        """The cluster's row as this worker knows it, the grace its silence gets, and its newest
        heartbeat's time."""
        current, grace = self._known.get(cluster), 0.0
        if current is None:
            # not heard from since this worker took its partition: the previous owner may have
            # seen heartbeats up to a checkpoint interval after the row's time (see the module)
            current, grace = ClusterHealth.model_validate(row), self._settings.checkpoint_interval_s
        return current, grace, max(current.last_seen, self._seen.get(cluster, current.last_seen))

    def _silence_due(
        self, cluster: str, current: ClusterHealth, *, grace: float, last_seen: float, now: float
    ) -> ClusterHealth | None:
        """The cluster's row with its newest heartbeat's time, when its silence or its republish turn
        calls for something this tick; None when not (a row silent past its expiry is dropped here).
        `current`, `grace` and `last_seen` are its `_silence_basis`."""
        stale = current.last_published is not False and now - last_seen >= self._settings.staleness_limit_s + grace
        if not stale and now - last_seen >= self._settings.row_expiry_s + grace:
            self._expire(cluster)
            return None
        if not stale and (current.last_published is None or not self._republish_due(cluster)):
            return None
        if last_seen != current.last_seen:
            current = current.model_copy(update={"last_seen": last_seen})
        return current

    async def _mark_stale(self, cluster: str, state: ClusterHealth, readiness: Readiness) -> None:
        await self._publish(readiness)
        self.metrics.stale_marks.inc()
        self.table[cluster] = state.model_dump()
        self._known[cluster] = state
        self._seen.pop(cluster, None)

    async def _say_again(self, cluster: str, current: ClusterHealth) -> Readiness:
        """Readiness is a state, not only a change: saying it again now and then repairs a planner
        that applied a change before the upgrade it follows, or a change lost in a crash between
        this table and the topic. The planner ignores repeats."""
        assert current.last_published is not None
        again = Readiness(
            cluster=cluster,
            ready=current.last_published,
            reason="unchanged",
            observed_at=current.evidence_at,
            control_plane_version=current.control_plane_version,
            node_version=current.node_version,
        )
        await self._publish(again, change=False)
        return again

    def _expire(self, cluster: str) -> None:
        """Drop a row silent for `row_expiry_s` and published stale: a name nobody reports for (made up,
        mistyped, decommissioned) is not said again every republish interval for ever. A heartbeat
        afterwards is a first one again."""
        del self.table[cluster]  # and a tombstone in the changelog
        self._known.pop(cluster, None)
        self._seen.pop(cluster, None)
        self._schedule.forget(cluster)
        self.metrics.rows_expired.inc()
        log.info("%s: no heartbeat for %.0f s; its row is dropped", cluster, self._settings.row_expiry_s)

    def _republish_due(self, cluster: str) -> bool:
        """Each cluster once per republish interval, spread over the timer's ticks by name."""
        group = self._republish_group(cluster)
        return group is not None and group == self._republish_turn()

    def _republish_buckets(self) -> int | None:
        interval = self._settings.republish_interval_s
        return None if interval <= 0 else max(1, round(interval / self._settings.check_interval_s))

    def _republish_group(self, cluster: str) -> int | None:
        """The ticks on which `cluster`'s readiness is said again (None: never)."""
        buckets = self._republish_buckets()
        return None if buckets is None else name_hash(cluster) % buckets

    def _republish_turn(self) -> int | None:
        """The republish group whose turn this tick is."""
        buckets = self._republish_buckets()
        return None if buckets is None else self._ticks % buckets

    def _row(self, cluster: str) -> ClusterHealth | None:
        """The cluster's row as last decided: unwritten, known since the rebalance, or the table's."""
        known = self._unwritten.get(cluster) or self._known.get(cluster)
        if known is not None:
            return known
        row = self.table.get(cluster)
        return None if row is None else ClusterHealth.model_validate(row)

    async def _publish(
        self, readiness: Readiness, *, change: bool = True, wait: bool = True
    ) -> asyncio.Future[Any] | None:
        """Sent and acknowledged (`wait`), or queued: then the future of its acknowledgement."""
        at = self._clock()
        log.info("%s is %s: %s", readiness.cluster, "ready" if readiness.ready else "not ready", readiness.reason)
        value, headers = encode(
            readiness,
            event_id=f"{readiness.cluster}/{at:.3f}",
            source=f"rollout-health/{self.app.conf.id}",
            at=at,
            subject=readiness.cluster,
        )
        key = READINESS.key(readiness).encode()
        delivery = None
        if wait:
            await self.outbox.send(self.readiness_topic, key=key, value=value, headers=headers)
        else:
            delivery = await self.outbox.send_soon(self.readiness_topic, key=key, value=value, headers=headers)
        if change:
            self.metrics.readiness_changes.labels(ready=str(readiness.ready).lower()).inc()
        return delivery

    @property
    def ready(self) -> bool:
        """Serving: the worker runs and its group is not rebalancing."""
        return bool(self.app.started) and not self.app.rebalancing

    @property
    def healthy(self) -> bool:
        return not self.app.crashed and not self.agent.crashed and self._in_flight.failure is None

    async def _dead_letter(self, record: Record, *, reason: str) -> None:
        source = f"rollout-health/{self.app.conf.id}"
        self.metrics.dead_letters.record(record, reason=reason, source=source)
        value, headers = dead_letter(record, reason=reason, source=source)
        await self.outbox.send(self.dead_letter_topic, key=record.key, value=value, headers=headers)


def _header_map(headers: Any) -> dict[str, bytes]:
    """Kafka headers arrive as (name, value) pairs (aiokafka's, tested first: every heartbeat) or a
    mapping; values may be None."""
    if isinstance(headers, list | tuple):
        return {str(name): value or b"" for name, value in headers}
    pairs = headers.items() if isinstance(headers, Mapping) else (headers or [])
    return {str(name): value or b"" for name, value in pairs}
