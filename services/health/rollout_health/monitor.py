"""The health monitor: a faust app turning heartbeats into readiness changes.

- Agent (concurrency 1: faust 0.15 can commit past an unfinished event with more): reads raw
  heartbeat records, decodes them with the CloudEvents envelope (a bad one is dead-lettered,
  never crashes the agent), updates the cluster's row and publishes a Readiness on change.
  It does not wait for the broker's ack of each change before the next heartbeat: acks are manual
  (`noack`), and `InFlight` writes a heartbeat's row and acks its event only once its readiness
  and every earlier one is acknowledged, so faust commits no offset ahead of what was published.
- Table `cluster-health`: {ready, last_seen, last_published, the versions last published} per
  cluster, changelog-backed in Kafka, so a restarted monitor neither forgets nor re-announces what it published.
- Timer: every `check_interval_s`, a cluster silent for `staleness_limit_s` is published not
  ready ("stale: no heartbeat for N s").

A row's changelog partition is the one Kafka's default partitioner gives its cluster name, as
for the heartbeats (keyed by cluster): the timer writes outside any event, where faust cannot
borrow the event's partition. Standby replicas are off, so a worker's timer only sees (and
writes) rows of partitions it owns.
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, cast

import faust

from rollout_adapters import faust_uncommitted_seek, kafka_fetcher_close, kafka_records
from rollout_adapters.faust_credentials import broker_credentials
from rollout_adapters.memory_bus import kafka_partition
from rollout_common.dead_letters import dead_letter
from rollout_common.envelope import decode, encode
from rollout_common.errors import InvalidInputError
from rollout_common.events import Readiness
from rollout_common.heartbeat import Heartbeat
from rollout_common.ports import Record
from rollout_common.topics.catalog import DEAD_LETTER, HEARTBEATS, READINESS
from rollout_health.cluster_health import ClusterHealth, after_heartbeat, after_silence
from rollout_health.in_flight import InFlight
from rollout_health.metrics import HealthMetrics
from rollout_health.outbox import FaustOutbox, Outbox
from rollout_health.settings import MonitorSettings

log = logging.getLogger(__name__)

Clock = Callable[[], float]
TABLE_NAME = "cluster-health"


class KeyPartitionedTable(faust.Table[str, dict[str, Any]]):
    """A table whose rows go to the partition of their key, inside or outside an event."""

    def partition_for_key(self, key: Any) -> int:
        return kafka_partition(str(key).encode(), HEARTBEATS.partitions)


class HealthMonitor:
    def __init__(
        self,
        settings: MonitorSettings,
        *,
        outbox: Outbox | None = None,
        clock: Clock = time.time,
        metrics: HealthMetrics | None = None,
    ) -> None:
        prefix = settings.topic_prefix
        self.metrics = metrics or HealthMetrics()
        self._settings = settings
        self._clock = clock
        # faust's consumer is aiokafka's: without these, a header name that is not UTF-8 raises in
        # its fetcher on every poll and the worker never reads that partition again (BUS-4), and
        # a SIGTERM with the broker down hangs the worker until its supervisor kills it.
        kafka_records.install()
        kafka_fetcher_close.install()
        # faust rewinds the records it fetched during a rebalance only on partitions with a committed
        # offset: without this, a worker killed before its first commit left its successor to start
        # at the end of the log and never judge the heartbeats in between (BUS-4)
        faust_uncommitted_seek.install()
        self.app = faust.App(
            settings.group(settings.app_id),
            # one URL per host: faust reads "kafka://a:1,b:2" as a single host named "a:1,b:2"
            broker=[f"kafka://{host.strip()}" for host in settings.kafka_bootstrap.split(",") if host.strip()],
            broker_credentials=broker_credentials(settings.kafka_security),
            store=settings.store_url,
            datadir=settings.data_dir,  # None: faust's own, `<app id>-data` in the working directory
            topic_replication_factor=settings.kafka_replication_factor,
            topic_partitions=HEARTBEATS.partitions,
            table_standby_replicas=0,
            # a killed worker's partitions move to its replacement after this, not faust's 60 s:
            # until then nobody turns heartbeats into readiness
            broker_session_timeout=settings.session_timeout_s,
            broker_heartbeat_interval=min(3.0, settings.session_timeout_s / 3),
            web_enabled=settings.web_port > 0,
            web_port=settings.web_port or 6066,
            autodiscover=False,
            # Table rows are JSON objects keyed by the cluster name's bytes (as the topics are).
            key_serializer="raw",
            value_serializer="json",
        )
        self.heartbeats = self.app.topic(
            prefix + HEARTBEATS.name,
            key_serializer="raw",
            value_serializer="raw",
            partitions=HEARTBEATS.partitions,
        )
        self.table = KeyPartitionedTable(self.app, name=TABLE_NAME, partitions=HEARTBEATS.partitions, key_type=str)
        self.app.tables.add(self.table)
        self.readiness_topic = prefix + READINESS.name
        self.dead_letter_topic = prefix + DEAD_LETTER.name
        self.outbox: Outbox = outbox or FaustOutbox(self.app)
        self._ticks = 0
        self._in_flight = InFlight()
        # rows decided by the agent whose readiness is not acknowledged yet: newer than the table's
        self._unwritten: dict[str, ClusterHealth] = {}
        self.agent = self.app.agent(self.heartbeats, name="heartbeats", concurrency=1)(self._process)
        self.app.timer(settings.check_interval_s, name="staleness")(self.check_staleness)

    async def _process(self, stream: faust.StreamT[bytes]) -> AsyncIterator[Readiness | None]:
        # faust's agent hands a Stream; StreamT does not declare noack
        manual = cast("faust.Stream[bytes]", stream).noack()
        async for event in manual.events():
            self._in_flight.check()
            await self._in_flight.room()
            self._in_flight.check()
            message = event.message
            record = Record(
                topic=message.topic,
                partition=message.partition,
                offset=message.offset,
                key=message.key,
                value=message.value or b"",
                headers=_header_map(message.headers),
                timestamp_ms=int(message.timestamp * 1000),
            )
            # Yielded so a test can wait for the event to be handled (its send queued).
            yield await self.on_record(record, finished=event.ack)

    async def on_record(self, record: Record, *, finished: Callable[[], object] = lambda: None) -> Readiness | None:
        """Any failure judging one record is that record's dead letter: the agent goes on (BUS-4).
        Publishing stays outside: a broker failure must not turn a good heartbeat into a dead letter.
        `finished` (the event's ack) runs once the record's readiness, if any, and every earlier
        record's are acknowledged, after its row is written."""
        try:
            cluster, previous, state, readiness = self._judge(record)
        except InvalidInputError as exc:
            await self._dead_letter(record, reason=str(exc))
            self._in_flight.add(None, finished)
            return None
        except Exception as exc:
            log.exception("handling a heartbeat raised; dead-lettered")
            first_line = (str(exc).splitlines() or [""])[0][:500]
            await self._dead_letter(record, reason=f"quarantined: handling raised {type(exc).__name__}: {first_line}")
            self._in_flight.add(None, finished)
            return None
        delivery = None if readiness is None else await self._publish(readiness, wait=False)
        if state == previous:
            self._in_flight.add(delivery, finished)
            return readiness
        self._unwritten[cluster] = state

        def write_row() -> None:
            # after the readiness is acknowledged: a row never says "published" before it is
            self.table[cluster] = state.model_dump()
            if self._unwritten.get(cluster) is state:
                del self._unwritten[cluster]
            finished()

        self._in_flight.add(delivery, write_row)
        return readiness

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
        previous = self._row(heartbeat.cluster)
        # The observation's time, not the monitor's nor the record's: a replayed or delayed old
        # heartbeat must not look fresh, and the planner orders readiness by it (BUS-7).
        state, readiness = after_heartbeat(previous, heartbeat, seen_at=heartbeat.observed_at)
        return heartbeat.cluster, previous, state, readiness

    async def check_staleness(self) -> list[Readiness]:
        now = self._clock()
        published: list[Readiness] = []
        self._ticks += 1
        for cluster, row in list(self.table.items()):
            if cluster in self._unwritten:
                continue  # a heartbeat was just judged: not silent, and its own readiness is on its way
            current = ClusterHealth.model_validate(row)
            state, readiness = after_silence(
                cluster, current, now=now, staleness_limit_s=self._settings.staleness_limit_s
            )
            if readiness is not None:
                await self._publish(readiness)
                self.metrics.stale_marks.inc()
                self.table[cluster] = state.model_dump()
                published.append(readiness)
            elif self._republish_due(cluster) and current.last_published is not None:
                # Readiness is a state, not only a change: saying it again now and then repairs a
                # planner that applied a change before the upgrade it follows, or a change lost in a
                # crash between this table and the topic. The planner ignores repeats.
                again = Readiness(
                    cluster=cluster,
                    ready=current.last_published,
                    reason="unchanged",
                    observed_at=current.evidence_at,
                    control_plane_version=current.control_plane_version,
                    node_version=current.node_version,
                )
                await self._publish(again, change=False)
                published.append(again)
        return published

    def _republish_due(self, cluster: str) -> bool:
        """Each cluster once per republish interval, spread over the timer's ticks by name."""
        interval = self._settings.republish_interval_s
        if interval <= 0:
            return False
        buckets = max(1, round(interval / self._settings.check_interval_s))
        return zlib.crc32(cluster.encode()) % buckets == self._ticks % buckets

    def _row(self, cluster: str) -> ClusterHealth | None:
        unwritten = self._unwritten.get(cluster)
        if unwritten is not None:
            return unwritten
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
    """Kafka headers arrive as (name, value) pairs or a mapping; values may be None."""
    pairs = headers.items() if isinstance(headers, Mapping) else (headers or [])
    return {str(name): value or b"" for name, value in pairs}
