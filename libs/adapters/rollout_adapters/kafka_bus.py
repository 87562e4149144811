"""The `Bus` port on a real Kafka cluster, through aiokafka.

Every aiokafka / broker error is translated (`kafka_errors`) into the port's errors (retry later or give
up), so the shell handles this bus and `MemoryBus` alike.

Unknown topics: a broker with `auto.create.topics.enable=true` would silently create a topic on
the first produce or subscribe, which hides typos and gives the topic default settings. This
adapter therefore checks that a topic exists (a metadata request that never creates anything)
before it first publishes to or subscribes to it, and raises `UnknownTopicError` otherwise,
whatever the broker's setting: the same rule `MemoryBus` applies.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiokafka.errors as kerr  # type: ignore[import-untyped]
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # type: ignore[import-untyped]
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType  # type: ignore[import-untyped]
from aiokafka.conn import collect_hosts, create_conn  # type: ignore[import-untyped]

from rollout_adapters import kafka_fetcher_close, kafka_port_records, kafka_records
from rollout_adapters.kafka_clients import PRODUCER_FLUSH_S, _quietly_closed, _start
from rollout_adapters.kafka_consumer import KafkaConsumer, UnreadableRecordError
from rollout_adapters.kafka_errors import _translated, translate
from rollout_common.errors import (
    InvalidInputError,
    PermanentError,
    TransientError,
    UnknownTopicError,
)
from rollout_common.ports import Outgoing, StartAt, TopicSpec

log = logging.getLogger(__name__)

SECURITY_KEYS = frozenset(
    {"security_protocol", "sasl_mechanism", "sasl_plain_username", "sasl_plain_password", "ssl_context"}
)

# Heartbeats every second let a member notice within about a second that another one joined or
# left (aiokafka's default of 3 s makes every rebalance slow); the session timeout stays at
# the default 10 s, the smallest most brokers accept.
_HEARTBEAT_INTERVAL_MS = 1000
_SESSION_TIMEOUT_MS = 10000
# aiokafka's own fetch wait (see `ConsumerOptions.fetch_max_wait_ms`).
_FETCH_MAX_WAIT_MS = 500
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
    - `fetch_max_wait_ms`: how long the broker may hold a fetch while the partitions in it have
      nothing new (a record that arrives ends the wait at once). aiokafka keeps one fetch a
      broker in flight and asks again for a partition whose fetched records were all taken only
      in the next one, so while the other partitions of that broker are idle, a backlog waits
      this long for each refill. A reader of several topics that catches up on one (the planner)
      sets it lower, at the price of more empty fetches while idle.
    - `metadata_max_age_ms`: how often the client reads the topics' metadata again. The group's
      leader assigns partitions from the metadata it has: one that joins while the broker is
      restarting and lists no topics yet assigns nothing, and it looks again (and rebalances,
      the topics having changed) only after this. aiokafka's 5 minutes left the group without
      partitions for that long; a metadata request every 10 s costs next to nothing.
    """

    session_timeout_ms: int = _SESSION_TIMEOUT_MS
    heartbeat_interval_ms: int = _HEARTBEAT_INTERVAL_MS
    max_poll_interval_ms: int = 300_000
    group_instance_id: str | None = None
    fetch_max_wait_ms: int = _FETCH_MAX_WAIT_MS
    metadata_max_age_ms: int = 10_000

    def __post_init__(self) -> None:
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise InvalidInputError("heartbeat_interval_ms must be below session_timeout_ms")
        if self.max_poll_interval_ms < 1 or self.session_timeout_ms < 1:
            raise InvalidInputError("timeouts must be positive")
        if self.fetch_max_wait_ms < 0:
            raise InvalidInputError("fetch_max_wait_ms must not be negative")
        if self.metadata_max_age_ms < 1:
            raise InvalidInputError("metadata_max_age_ms must be positive")


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
        self._security = _checked_security(security)
        self._bootstrap = bootstrap
        self._client_id = client_id
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
        # consumer closed with the broker down would raise CancelledError out of its close; our
        # consumers' records are built as `Record`s in the fetcher (one object a record, not two).
        kafka_records.install()
        kafka_port_records.install()
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
        replicas = {t["topic"]: min(len(p["replicas"]) for p in t["partitions"]) for t in described if t["partitions"]}
        return shortfall(
            names,
            replicas=replicas,
            min_isr=_min_isr_by_topic(configs),
            replication_factor=self._replication_factor,
            min_insync_replicas=self._min_insync_replicas,
        )

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
        await self.publish_many([Outgoing(topic=topic, key=key, value=value, headers=headers or {})])

    async def publish_many(self, messages: Sequence[Outgoing]) -> None:
        self._check_open()
        if not messages:
            return
        topics = sorted({message.topic for message in messages})
        await self._require_topics(topics)
        producer = await self._started_producer()
        doing = f"publish to {', '.join(repr(topic) for topic in topics)}"
        try:
            # An idempotent producer never expires a batch on a retriable error: with the broker
            # gone, waiting for the acknowledgements would wait for ever. A record may still be
            # delivered once the broker is back, so a caller's retry can publish it twice (at
            # least once).
            async with asyncio.timeout(self._publish_timeout_s):
                with _translated(doing, topics_checked=True):
                    await _sent_together(producer, messages)
        except TimeoutError as exc:
            raise TransientError(f"kafka: {doing}: no acknowledgement within {self._publish_timeout_s:g} s") from exc
        except PermanentError as exc:
            if not isinstance(exc.__cause__, kerr.OutOfOrderSequenceNumber):
                raise
            # A restarted broker lost this idempotent producer's sequence numbers: the producer is
            # spent, a fresh one (a new producer id) sends the same records again.
            await self._drop_producer(producer)
            raise TransientError(f"kafka: {doing}: the broker lost the producer's state ({exc})") from exc

    def consumer(
        self,
        topics: Sequence[str],
        *,
        group: str | None,
        from_beginning: bool = True,
        start_at: StartAt | None = None,
    ) -> KafkaConsumer:
        self._check_open()
        if group is None and start_at is not None:
            raise InvalidInputError("start_at needs a group: a consumer without one starts at the beginning or the end")
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


def _checked_security(security: Mapping[str, Any] | None) -> dict[str, Any]:
    """The client security settings, refused when one of them is not a setting the bus knows."""
    unknown = set(security or {}) - SECURITY_KEYS
    if unknown:
        raise InvalidInputError(f"unknown security settings {sorted(unknown)}; allowed: {sorted(SECURITY_KEYS)}")
    return dict(security or {})


def shortfall(
    names: Sequence[str],
    *,
    replicas: Mapping[str, int],
    min_isr: Mapping[str, int],
    replication_factor: int,
    min_insync_replicas: int,
) -> list[str]:
    """Each of `names` with fewer `replicas` or a lower `min_isr` than asked, as "<topic>: <what>".

    A topic missing from either mapping is not judged on it: a topic created a moment ago may not
    be in the answering broker's metadata yet, and that broker then answers its configs with an
    error and no values. Reading that as the broker's default (1) warned about topics created a
    moment before with min.insync.replicas 2."""
    short = []
    for name in names:
        problems = []
        if name in replicas and replicas[name] < replication_factor:
            problems.append(f"{replicas[name]} replicas")
        if name in min_isr and min_isr[name] < min_insync_replicas:
            problems.append(f"min.insync.replicas {min_isr[name]}")
        if problems:
            short.append(f"{name}: {', '.join(problems)}")
    return short


def _min_isr_by_topic(responses: Sequence[Any]) -> dict[str, int]:
    """min.insync.replicas per topic from DescribeConfigs responses (v0+: resources of
    (error code, message, type, name, [(config name, value, ...)])); a topic answered with an
    error is left out."""
    found: dict[str, int] = {}
    for response in responses:
        for resource in response.resources:
            code, name, entries = resource[0], resource[3], resource[4]
            if code:
                continue
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


async def _sent_together(producer: Any, messages: Sequence[Outgoing]) -> None:
    """Every message handed to the producer before any acknowledgement is awaited: one round trip
    for all of them, not one each. The producer keeps each partition's order; the first failure
    is raised once every message has settled."""
    acks = [
        await producer.send(
            message.topic,
            message.value,
            key=message.key,
            headers=[(name, bytes(data)) for name, data in message.headers.items()],
        )
        for message in messages
    ]
    outcomes = await asyncio.gather(*acks, return_exceptions=True)
    failed = next((outcome for outcome in outcomes if isinstance(outcome, BaseException)), None)
    if failed is not None:
        raise failed


__all__ = [
    "PRODUCER_FLUSH_S",
    "PUBLISH_TIMEOUT_S",
    "SECURITY_KEYS",
    "ConsumerOptions",
    "KafkaBus",
    "KafkaConsumer",
    "UnreadableRecordError",
    "translate",
]
