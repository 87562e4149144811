"""The `Bus` port on a real Kafka cluster, through aiokafka.

Every aiokafka / broker error is translated here into the port's errors (retry later or give
up), so the shell handles this bus and `MemoryBus` alike.

Unknown topics: a broker with `auto.create.topics.enable=true` would silently create a topic on
the first produce or subscribe, which hides typos and gives the topic default settings. This
adapter therefore checks that a topic exists (a metadata request that never creates anything)
before it first publishes to or subscribes to it, and raises `UnknownTopicError` otherwise,
whatever the broker's setting: the same rule `MemoryBus` applies.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from types import MappingProxyType
from typing import Any

import aiokafka.errors as kerr  # type: ignore[import-untyped]
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener  # type: ignore[import-untyped]
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # type: ignore[import-untyped]
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType  # type: ignore[import-untyped]
from aiokafka.conn import collect_hosts, create_conn  # type: ignore[import-untyped]
from aiokafka.coordinator.assignors.range import RangePartitionAssignor  # type: ignore[import-untyped]

from rollout_adapters import kafka_fetcher_close, kafka_records
from rollout_adapters.memory_bus import next_offsets
from rollout_common.errors import (
    InvalidInputError,
    PermanentError,
    RolloutError,
    TransientError,
    UnknownTopicError,
)
from rollout_common.ports import Record, StartAt, TopicSpec

log = logging.getLogger(__name__)

SECURITY_KEYS = frozenset(
    {"security_protocol", "sasl_mechanism", "sasl_plain_username", "sasl_plain_password", "ssl_context"}
)

# Heartbeats every second let a member notice within about a second that another one joined or
# left (aiokafka's default of 3 s makes every rebalance slow); the session timeout stays at
# the default 10 s, the smallest most brokers accept.
_HEARTBEAT_INTERVAL_MS = 1000
_SESSION_TIMEOUT_MS = 10000
_CREATE_TIMEOUT_MS = 30000


@dataclass(frozen=True)
class ConsumerOptions:
    """Group-membership knobs of every consumer a bus makes.

    - `session_timeout_ms`: how long the broker waits for heartbeats before it gives the
      member's partitions away (heartbeats come from a background task, so a busy event loop
      alone does not drop the member).
    - `max_poll_interval_ms`: the longest time between two polls before the member leaves the
      group on its own; a service that works on a batch for long between polls raises it.
    - `group_instance_id`: static membership. A restarted member with the same id gets its
      partitions back without a rebalance if it returns within the session timeout; two live
      members must never share one (the broker fences the older).
    """

    session_timeout_ms: int = _SESSION_TIMEOUT_MS
    heartbeat_interval_ms: int = _HEARTBEAT_INTERVAL_MS
    max_poll_interval_ms: int = 300_000
    group_instance_id: str | None = None

    def __post_init__(self) -> None:
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise InvalidInputError("heartbeat_interval_ms must be below session_timeout_ms")
        if self.max_poll_interval_ms < 1 or self.session_timeout_ms < 1:
            raise InvalidInputError("timeouts must be positive")


# Errors that no retry can fix, even those aiokafka flags as retriable.
_PERMANENT = (
    kerr.TopicAuthorizationFailedError,
    kerr.GroupAuthorizationFailedError,
    kerr.ClusterAuthorizationFailedError,
    kerr.AuthenticationFailedError,
    kerr.SaslAuthenticationFailed,
    kerr.MessageSizeTooLargeError,
    kerr.RecordTooLargeError,
    kerr.RecordListTooLargeError,
    kerr.InvalidConfigurationError,
    kerr.InvalidTopicError,
    kerr.InvalidPartitionsError,
    kerr.InvalidReplicationFactorError,
    kerr.PolicyViolationError,
    kerr.KafkaConfigurationError,
    kerr.UnsupportedVersionError,
)
# Retry later: the cluster is unreachable, electing a leader or rebalancing the group. Errors
# aiokafka itself marks `retriable` count too.
_TRANSIENT = (
    kerr.KafkaConnectionError,
    kerr.KafkaTimeoutError,
    kerr.KafkaUnavailableError,
    kerr.RequestTimedOutError,
    kerr.NotLeaderForPartitionError,
    kerr.LeaderNotAvailableError,
    kerr.GroupCoordinatorNotAvailableError,
    kerr.NotCoordinatorForGroupError,
    kerr.RebalanceInProgressError,
    kerr.CommitFailedError,
    kerr.IllegalGenerationError,
    kerr.UnknownMemberIdError,
    OSError,
    TimeoutError,
)


# What the broker answers to a login it refuses. aiokafka 0.14 logs it and then reports only
# `KafkaConnectionError: Unable to bootstrap`, so the bus asks again itself (`_connection_refusal`).
_LOGIN_REFUSED = (
    kerr.SaslAuthenticationFailed,
    kerr.AuthenticationFailedError,
    kerr.UnsupportedSaslMechanismError,
    kerr.IllegalSaslStateError,
)
_PROBE_TIMEOUT_MS = 10_000
# How long `publish` waits for the broker's acknowledgement before reporting a TransientError.
PUBLISH_TIMEOUT_S = 30.0


def translate(exc: BaseException, doing: str) -> RolloutError:
    """The port's error for a driver error met while `doing` something."""
    message = f"kafka: {doing}: {type(exc).__name__}: {exc}"
    if isinstance(exc, kerr.UnknownTopicOrPartitionError):
        return UnknownTopicError(message)
    if isinstance(exc, _PERMANENT):
        return PermanentError(message)
    if isinstance(exc, _TRANSIENT) or getattr(exc, "retriable", False):
        return TransientError(message)
    return PermanentError(message)


@contextmanager
def _translated(doing: str, *, topics_checked: bool = False) -> Iterator[None]:
    """`topics_checked`: the topics were seen to exist; an unknown topic now is a broker that is
    stopping or restarting (it answers so while it loads), worth a retry, not an exit."""
    try:
        yield
    except kerr.UnknownTopicOrPartitionError as exc:
        if topics_checked:
            raise TransientError(f"kafka: {doing}: {type(exc).__name__}: {exc}") from exc
        raise translate(exc, doing) from exc
    except (kerr.KafkaError, kerr.ConsumerStoppedError, kerr.IllegalOperation, OSError, TimeoutError) as exc:
        raise translate(exc, doing) from exc


class KafkaBus:
    """Implements `rollout_common.ports.Bus`.

    `replication_factor` and `min_insync_replicas` apply to the topics `ensure_topics` creates (1 and
    1 for a single test broker; 3 and 2 on a production cluster); topics that exist with less are
    named in one warning (`replication_shortfall`). `security` holds the aiokafka settings named in
    `SECURITY_KEYS`, passed to every client the bus makes (see `rollout_adapters.connections`
    for building it from settings). `consumer_options` apply to every consumer it makes.
    """

    def __init__(
        self,
        bootstrap: str,
        *,
        client_id: str,
        security: Mapping[str, Any] | None = None,
        replication_factor: int = 1,
        min_insync_replicas: int = 1,
        consumer_options: ConsumerOptions | None = None,
        publish_timeout_s: float = PUBLISH_TIMEOUT_S,
    ) -> None:
        unknown = set(security or {}) - SECURITY_KEYS
        if unknown:
            raise InvalidInputError(f"unknown security settings {sorted(unknown)}; allowed: {sorted(SECURITY_KEYS)}")
        self._bootstrap = bootstrap
        self._client_id = client_id
        self._security = dict(security or {})
        self._replication_factor = replication_factor
        self._min_insync_replicas = min_insync_replicas
        self.consumer_options = consumer_options or ConsumerOptions()
        self._publish_timeout_s = publish_timeout_s
        self._producer: Any = None
        self._admin: Any = None
        self._start_lock = asyncio.Lock()
        self._known_topics: set[str] = set()
        self._consumers: set[KafkaConsumer] = set()
        self._closed = False
        # A header name that is not UTF-8 would stop every poll of its partition (BUS-4); a
        # consumer closed with the broker down would raise CancelledError out of its close.
        kafka_records.install()
        kafka_fetcher_close.install()

    async def ensure_topics(self, topics: Sequence[TopicSpec]) -> None:
        self._check_open()
        for spec in topics:
            if spec.partitions < 1:
                raise InvalidInputError(f"topic {spec.name!r}: partitions must be >= 1")
        if not topics:
            return
        admin = await self._started_admin()
        new_topics = [_new_topic(spec, self._replication_factor, self._min_insync_replicas) for spec in topics]
        with _translated("create topics"):
            response = await admin.create_topics(new_topics, timeout_ms=_CREATE_TIMEOUT_MS)
        for name, code, *rest in response.topic_errors:
            error_type = kerr.for_code(code)
            # An existing topic is kept as it is: its settings are not compared or changed.
            if code and error_type is not kerr.TopicAlreadyExistsError:
                raise translate(error_type(rest[0] if rest else ""), f"create topic {name!r}")
        self._known_topics.update(spec.name for spec in topics)
        short = await self.replication_shortfall([spec.name for spec in topics])
        if short:
            log.warning(
                "kafka: topics replicated below what the settings ask (replication factor %d, "
                "min.insync.replicas %d): %s",
                self._replication_factor,
                self._min_insync_replicas,
                "; ".join(short),
            )

    async def replication_shortfall(self, names: Sequence[str]) -> list[str]:
        """Each of `names` whose partitions have fewer replicas, or whose min.insync.replicas is
        lower, than this bus creates topics with (a topic made earlier, by hand or with other
        settings), as "<topic>: <what>"; empty when all are as asked."""
        admin = await self._started_admin()
        with _translated("describe topics"):
            described = await admin.describe_topics(list(names))
            configs = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, name, {"min.insync.replicas": None}) for name in names]
            )
        # A topic created a moment ago may not be in this broker's metadata yet: not judged.
        replicas = {t["topic"]: min(len(p["replicas"]) for p in t["partitions"]) for t in described if t["partitions"]}
        min_isr = _min_isr_by_topic(configs)
        short = []
        for name in names:
            problems = []
            if replicas.get(name, self._replication_factor) < self._replication_factor:
                problems.append(f"{replicas[name]} replicas")
            if min_isr.get(name, 1) < self._min_insync_replicas:
                problems.append(f"min.insync.replicas {min_isr.get(name, 1)}")
            if problems:
                short.append(f"{name}: {', '.join(problems)}")
        return short

    async def partition_counts(self, names: Sequence[str]) -> dict[str, int]:
        """The partition count of each topic of `names` that exists (absent ones are left out)."""
        self._check_open()
        admin = await self._started_admin()
        with _translated("describe topics"):
            # Describing a missing topic would make a broker that auto-creates topics create it
            # with its default partitions: only the listed ones are described.
            existing = set(await admin.list_topics())
            wanted = [name for name in names if name in existing]
            described = await admin.describe_topics(wanted) if wanted else []
        return {
            str(topic["topic"]): len(topic["partitions"])
            for topic in described
            if topic["error_code"] == 0 and topic["partitions"]
        }

    async def publish(
        self, topic: str, *, key: bytes | None, value: bytes, headers: Mapping[str, bytes] | None = None
    ) -> None:
        self._check_open()
        await self._require_topics([topic])
        producer = await self._started_producer()
        wire_headers = [(name, bytes(data)) for name, data in (headers or {}).items()]
        try:
            # An idempotent producer never expires a batch on a retriable error: with the broker
            # gone, send_and_wait would wait for ever. The record may still be delivered once the
            # broker is back, so a caller's retry can publish it twice (at least once).
            async with asyncio.timeout(self._publish_timeout_s):
                with _translated(f"publish to {topic!r}", topics_checked=True):
                    await producer.send_and_wait(topic, value, key=key, headers=wire_headers)
        except TimeoutError as exc:
            raise TransientError(
                f"kafka: publish to {topic!r}: no acknowledgement within {self._publish_timeout_s:g} s"
            ) from exc
        except PermanentError as exc:
            if not isinstance(exc.__cause__, kerr.OutOfOrderSequenceNumber):
                raise
            # A restarted broker lost this idempotent producer's sequence numbers: the producer is
            # spent, a fresh one (a new producer id) sends the same record again.
            await self._drop_producer(producer)
            raise TransientError(f"kafka: publish to {topic!r}: the broker lost the producer's state ({exc})") from exc

    def consumer(
        self,
        topics: Sequence[str],
        *,
        group: str,
        from_beginning: bool = True,
        start_at: StartAt | None = None,
    ) -> KafkaConsumer:
        self._check_open()
        consumer = KafkaConsumer(self, topics=topics, group=group, from_beginning=from_beginning, start_at=start_at)
        self._consumers.add(consumer)
        return consumer

    async def close(self) -> None:
        """Close the consumers this bus made, then its producer and admin client."""
        self._closed = True
        for consumer in list(self._consumers):
            await consumer.close()
        for client in (self._producer, self._admin):
            if client is not None:
                await _quietly_closed(client)
        self._producer = self._admin = None

    async def _require_topics(self, names: Sequence[str]) -> None:
        """Raise UnknownTopicError unless every topic exists; checked once per topic and bus."""
        missing = [name for name in names if name not in self._known_topics]
        if not missing:
            return
        admin = await self._started_admin()
        with _translated("list topics"):
            # A metadata request for all topics: unlike one naming the topic, it never makes
            # the broker auto-create anything.
            existing = set(await admin.list_topics())
        self._known_topics.update(existing.intersection(missing))
        absent = sorted(set(missing) - existing)
        if absent:
            hint = ""
            if self._uses_sasl:
                # The broker hides a topic from a principal with no ACL on it at all.
                user = self._security.get("sasl_plain_username")
                hint = f", or user {user!r} has no ACL on them (a topic it may not DESCRIBE is hidden from it)"
            raise UnknownTopicError(f"topics {absent} do not exist (create them with ensure_topics){hint}")

    @property
    def _uses_sasl(self) -> bool:
        return str(self._security.get("security_protocol", "PLAINTEXT")).startswith("SASL")

    @property
    def _uses_ssl(self) -> bool:
        return str(self._security.get("security_protocol", "PLAINTEXT")).endswith("SSL")

    async def _start(self, client: Any, doing: str, *, topics_checked: bool = False) -> None:
        """Start an aiokafka client; on failure close it. A failed bootstrap with SASL or TLS
        configured is checked for a refused login or a failed TLS handshake, which becomes a
        PermanentError naming the settings to fix instead of a retry."""
        try:
            await _start(client, doing, topics_checked=topics_checked)
        except TransientError as exc:
            if not ((self._uses_sasl or self._uses_ssl) and isinstance(exc.__cause__, kerr.KafkaConnectionError)):
                raise
            refusal = await self._connection_refusal()
            if refusal is None:
                raise
            raise PermanentError(f"kafka: {doing}: {self._explain(refusal)}") from refusal

    def _explain(self, refusal: BaseException) -> str:
        what = f"({type(refusal).__name__}: {refusal})"
        if isinstance(refusal, ssl.SSLError):
            return (
                f"the TLS handshake with {self._bootstrap} failed {what}: check the CA bundle and the host "
                "name the certificate must carry (ROLLOUT_KAFKA_SECURITY__SSL_CAFILE, __SSL_CHECK_HOSTNAME), "
                "and that this listener speaks TLS"
            )
        user = self._security.get("sasl_plain_username")
        mechanism = self._security.get("sasl_mechanism")
        return (
            f"the broker refused the SASL login of user {user!r} with {mechanism} {what}: check the user "
            "name, password and mechanism (ROLLOUT_KAFKA_SECURITY__SASL_USERNAME, __SASL_PASSWORD, __SASL_MECHANISM)"
        )

    async def _connection_refusal(self) -> BaseException | None:
        """Why this bus cannot connect, from one connection per bootstrap server: the broker's
        refusal of its login, or the TLS handshake's failure; None when a server accepts it or
        none answers (then the failure was something else)."""
        for host, port, _ in collect_hosts(self._bootstrap):
            try:
                conn = await create_conn(
                    host, port, client_id=self._client_id, request_timeout_ms=_PROBE_TIMEOUT_MS, **self._security
                )
            except (*_LOGIN_REFUSED, ssl.SSLError) as exc:  # SSLError before OSError: it is one
                refusal: BaseException = exc
                return refusal
            except (kerr.KafkaError, OSError, TimeoutError):
                continue
            conn.close()
            return None
        return None

    def _client_settings(self) -> dict[str, Any]:
        """What every aiokafka client of this bus is built with."""
        return {"bootstrap_servers": self._bootstrap, "client_id": self._client_id, **self._security}

    def _check_open(self) -> None:
        if self._closed:
            raise PermanentError("the bus is closed")

    def _forget(self, consumer: KafkaConsumer) -> None:
        self._consumers.discard(consumer)

    async def _started_producer(self) -> Any:
        async with self._start_lock:
            if self._producer is None:
                producer = AIOKafkaProducer(**self._client_settings(), enable_idempotence=True, acks="all")
                await self._start(producer, "start the producer")
                self._producer = producer
            return self._producer

    async def _drop_producer(self, producer: Any) -> None:
        async with self._start_lock:
            if self._producer is producer:
                self._producer = None
        await _quietly_closed(producer)

    async def _started_admin(self) -> Any:
        async with self._start_lock:
            if self._admin is None:
                admin = AIOKafkaAdminClient(**self._client_settings())
                await self._start(admin, "start the admin client")
                self._admin = admin
            return self._admin


class _Ownership(ConsumerRebalanceListener):  # type: ignore[misc]
    """Follows which partitions the member owns, and keeps commits and rebalances apart.

    For at-least-once it commits nothing on revocation (records handed out by `poll` may still
    be in work); it only waits for a commit in flight to land before the partitions move.
    """

    def __init__(self, start_at: StartAt | None = None) -> None:
        self.commit_lock = asyncio.Lock()
        # Empty before the first assignment; None while a rebalance is under way.
        self.owned: frozenset[TopicPartition] | None = frozenset()
        self.start_at = start_at
        self.consumer: Any = None
        # Where `start_at` moved a partition, to be committed: the group's offset must follow, or a
        # partition skipped ahead shows lag (and replays on a plain consumer) until its next record.
        self.started_at: dict[TopicPartition, int] = {}

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        async with self.commit_lock:
            self.owned = None

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        if self.start_at is not None and self.consumer is not None:
            for tp in sorted(assigned):
                offset = self.start_at(tp.topic, tp.partition)
                if offset is not None:
                    # The owner's own checkpoint wins over the group's committed offset, either way:
                    # behind it (a store restored from an older backup) replays, ahead of it skips.
                    self.consumer.seek(tp, offset)
                    self.started_at[tp] = offset
        self.owned = frozenset(assigned)


class KafkaConsumer:
    """One member of a consumer group; joins on its first poll. Commits only by hand."""

    def __init__(
        self,
        bus: KafkaBus,
        *,
        topics: Sequence[str],
        group: str,
        from_beginning: bool,
        start_at: StartAt | None = None,
    ) -> None:
        self._bus = bus
        self._topics = list(topics)
        self._group = group
        self._from_beginning = from_beginning
        self._ownership = _Ownership(start_at)
        self._consumer: Any = None
        self._start_lock = asyncio.Lock()
        self._closed = False

    def assignment(self) -> frozenset[tuple[str, int]]:
        """The (topic, partition) pairs this member owns now (empty before its first poll)."""
        if self._consumer is None:
            return frozenset()
        return frozenset((tp.topic, tp.partition) for tp in self._consumer.assignment())

    async def poll(self, *, max_records: int = 500, timeout_s: float = 1.0) -> list[Record]:
        if max_records < 1:
            raise InvalidInputError("max_records must be >= 1")
        consumer = await self._started()
        with _translated(f"poll {self._topics}", topics_checked=True):
            try:
                batches = await consumer.getmany(timeout_ms=int(timeout_s * 1000), max_records=max_records)
            except UnicodeDecodeError as exc:
                raise UnreadableRecordError(_unreadable(self._topics, self._group)) from exc
        if self._ownership.started_at:
            await self._commit_start_positions()
        return [_to_record(message) for tp in sorted(batches) for message in batches[tp]]

    async def _commit_start_positions(self) -> None:
        """Commit where `start_at` started each partition (the records before it are done): once
        joined, before any record after it is handed out; a failed try is made again next poll."""
        started, self._ownership.started_at = self._ownership.started_at, {}
        try:
            await self._commit_owned(started)
        except TransientError:
            self._ownership.started_at = {**started, **self._ownership.started_at}

    async def positioned(self) -> None:
        """Joined, with a read position on every owned partition: whatever is published from now on
        is read. (A member of a new group that only starts its first poll after publishing could
        have its position set past a message published in between.)"""
        consumer = await self._started()
        while not consumer.assignment():
            with _translated(f"join group {self._group!r}"):
                await consumer.getmany(timeout_ms=100, max_records=1)
        for tp in consumer.assignment():
            with _translated(f"position on {tp.topic}[{tp.partition}]"):
                await consumer.position(tp)

    async def commit(self, records: Sequence[Record]) -> None:
        self._check_open()
        await self._commit_owned({TopicPartition(*tp): offset for tp, offset in next_offsets(records).items()})

    async def _commit_owned(self, offsets: dict[TopicPartition, int]) -> None:
        if not offsets or self._consumer is None:
            return
        async with self._ownership.commit_lock:
            owned = self._ownership.owned
            if owned is None:
                raise TransientError(f"kafka: group {self._group!r} is rebalancing; commit again", retry_after_s=0.5)
            # Partitions that moved to another member are left out: their records are delivered
            # again to the new owner (at-least-once); committing them would be refused anyway.
            mine = {tp: offset for tp, offset in offsets.items() if tp in owned}
            if mine:
                with _translated(f"commit for group {self._group!r}"):
                    await self._consumer.commit(mine)

    async def close(self) -> None:
        """Leave the group (uncommitted records go to the partitions' next owner)."""
        if self._closed:
            return
        self._closed = True
        self._bus._forget(self)
        if self._consumer is not None:
            await _quietly_closed(self._consumer)

    def _check_open(self) -> None:
        if self._closed:
            raise PermanentError("the consumer is closed")
        self._bus._check_open()

    async def _started(self) -> Any:
        self._check_open()
        async with self._start_lock:
            if self._consumer is None:
                await self._bus._require_topics(self._topics)
                consumer = AIOKafkaConsumer(
                    **self._bus._client_settings(),
                    group_id=self._group,
                    enable_auto_commit=False,
                    auto_offset_reset="earliest" if self._from_beginning else "latest",
                    # Range, as MemoryBus: co-partitioned topics land on the same member.
                    partition_assignment_strategy=(RangePartitionAssignor,),
                    **asdict(self._bus.consumer_options),
                )
                self._ownership.consumer = consumer
                consumer.subscribe(self._topics, listener=self._ownership)
                await self._bus._start(consumer, f"join group {self._group!r}", topics_checked=True)
                self._consumer = consumer
            return self._consumer


async def _start(client: Any, doing: str, *, topics_checked: bool = False) -> None:
    """Start an aiokafka client; on failure close it, so no half-open connection is left."""
    try:
        with _translated(doing, topics_checked=topics_checked):
            await client.start()
    except BaseException:
        await _quietly_closed(client)
        raise


async def _quietly_closed(client: Any) -> None:
    # Closing is best effort: a broker that is gone must not turn shutdown into an error.
    if isinstance(client, AIOKafkaProducer):
        await _closed_producer(client)
        return
    close = client.close if isinstance(client, AIOKafkaAdminClient) else client.stop
    try:
        await close()
    except (kerr.KafkaError, OSError, TimeoutError) as exc:
        log.warning("kafka: closing %s failed: %s", type(client).__name__, exc)


# How long closing the producer waits for the records it holds to be acknowledged.
PRODUCER_FLUSH_S = 5.0


async def _closed_producer(producer: Any) -> None:
    """Stop `producer`, waiting at most PRODUCER_FLUSH_S for its records to be acknowledged.

    An idempotent producer retries its records for ever while the broker is gone, and its `stop`
    flushes first: unbounded, a SIGTERM'd service would never end. Records dropped here were never
    acknowledged to a caller (its `publish` raised), so nothing acknowledged is lost.
    """
    try:
        async with asyncio.timeout(PRODUCER_FLUSH_S):
            await producer.stop()
        return
    except TimeoutError:
        log.warning(
            "kafka: the producer's unacknowledged records were not delivered within %.0f s; dropped", PRODUCER_FLUSH_S
        )
    except (kerr.KafkaError, OSError) as exc:
        log.warning("kafka: closing the producer failed: %s", exc)
    # `stop` was cut short after marking the producer closed, so a second `stop` would do
    # nothing: end its sender task and its connections the way `stop` would have after the flush.
    with contextlib.suppress(kerr.KafkaError, OSError):
        sender = getattr(producer, "_sender", None)
        if sender is not None:
            await sender.close()
        await producer.client.close()


def _min_isr_by_topic(responses: Sequence[Any]) -> dict[str, int]:
    """min.insync.replicas per topic from DescribeConfigs responses (v0+: resources of
    (error code, message, type, name, [(config name, value, ...)]))."""
    found: dict[str, int] = {}
    for response in responses:
        for resource in response.resources:
            name, entries = resource[3], resource[4]
            for entry in entries:
                if entry[0] == "min.insync.replicas" and entry[1] is not None:
                    found[name] = int(entry[1])
    return found


def _new_topic(spec: TopicSpec, replication_factor: int, min_insync_replicas: int = 1) -> Any:
    configs = {"cleanup.policy": "compact" if spec.compacted else "delete"}
    if min_insync_replicas > 1:
        configs["min.insync.replicas"] = str(min_insync_replicas)
    if spec.retention_ms is not None:
        configs["retention.ms"] = str(spec.retention_ms)
    return NewTopic(spec.name, spec.partitions, replication_factor, topic_configs=configs)


class UnreadableRecordError(PermanentError):
    """A record the Kafka client cannot unpack, so it cannot be handed out, dead-lettered or skipped.
    `kafka_records.install()` (done by every bus) reads header names that are not UTF-8, the one
    known cause; this stays for a client whose fetcher that reader is not installed in."""


def _unreadable(topics: Sequence[str], group: str) -> str:
    # aiokafka decodes header names while unpacking a fetched batch and raises on every poll of
    # that partition; no service can see such a record, so the operator has to move past it.
    return (
        f"a record on {', '.join(topics)} has a header name that is not UTF-8, which the Kafka client cannot "
        f"read: find it with `kcat -C -t TOPIC -f '%p %o %h\\n'` and move group {group!r} past it with "
        "kafka-consumer-groups.sh --reset-offsets --to-offset OFFSET+1 --topic TOPIC:PARTITION "
        "(docs/security.md, Bad input)"
    )


def _to_record(message: ConsumerRecord[bytes, bytes]) -> Record:
    # Kafka allows null values (tombstones) and null header values; the port has bytes only, as
    # anything published through it does, so a null from another producer reads as empty.
    return Record(
        topic=message.topic,
        partition=message.partition,
        offset=message.offset,
        key=message.key,
        value=message.value or b"",
        headers=MappingProxyType({name: data or b"" for name, data in message.headers}),
        timestamp_ms=message.timestamp,
    )
