"""Is the local broker ready for real work? Ready means a consumer group can join and commit.

The listener port opens, and even metadata answers, seconds before the group coordinator has
loaded `__consumer_offsets`; a test that starts then would see its first group join time out.
So the probe walks the whole path a test takes: create a topic, produce, consume in a group,
commit.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

# Fixed names, so that probing again after a restart reuses them instead of piling up new ones.
PROBE_TOPIC = "_rollout-devenv-probe"
PROBE_GROUP = "_rollout-devenv-probe"
_TOPIC_ALREADY_EXISTS = 36
_REQUEST_TIMEOUT_MS = 5000
PROBE_TIMEOUT_S = 20.0

_PROBE_THREAD = "rollout-devenv-probe"

T = TypeVar("T")


def _not_from_probe(record: logging.LogRecord) -> bool:
    return record.threadName != _PROBE_THREAD


def _quiet_probe_logs() -> None:
    """Drop aiokafka's log records made by the probe thread, and only those.

    Probing a broker that is still booting fails by design a few times; aiokafka logs each of
    those as an ERROR, which would read like a real fault in test reports and on the terminal.
    Filters on a logger do not apply to its children, so each aiokafka logger gets one.
    """
    for name in list(logging.root.manager.loggerDict):
        if name == "aiokafka" or name.startswith("aiokafka."):
            logging.getLogger(name).addFilter(_not_from_probe)


_quiet_probe_logs()


class ProbeError(Exception):
    """The broker answered, but not (yet) well enough."""


async def _ensure_topic(bootstrap: str, security: dict[str, Any], replication_factor: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=_REQUEST_TIMEOUT_MS, **security)
    try:
        await admin.start()
        await admin.describe_cluster()
        response = await admin.create_topics(
            [NewTopic(PROBE_TOPIC, num_partitions=1, replication_factor=replication_factor)]
        )
    finally:
        await admin.close()
    # aiokafka returns per-topic error codes rather than raising them.
    codes = {entry[1] for entry in response.topic_errors}
    if codes - {0, _TOPIC_ALREADY_EXISTS}:
        raise ProbeError(f"creating {PROBE_TOPIC} failed with error codes {sorted(codes)}")


async def _produce(bootstrap: str, value: bytes, security: dict[str, Any]) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, enable_idempotence=True, request_timeout_ms=_REQUEST_TIMEOUT_MS, **security
    )
    try:
        await producer.start()
        await producer.send_and_wait(PROBE_TOPIC, value)
    finally:
        await producer.stop()


async def _consume_and_commit(bootstrap: str, value: bytes, security: dict[str, Any]) -> None:
    consumer = AIOKafkaConsumer(
        PROBE_TOPIC,
        bootstrap_servers=bootstrap,
        **security,
        group_id=PROBE_GROUP,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=_REQUEST_TIMEOUT_MS,
    )
    try:
        await consumer.start()
        # Values of earlier, failed probes may come first; read on to this probe's own.
        while True:
            batches = await consumer.getmany(timeout_ms=500)
            if any(record.value == value for records in batches.values() for record in records):
                await consumer.commit()
                return
    finally:
        await consumer.stop()


async def probe(bootstrap: str, security: dict[str, Any] | None = None, replication_factor: int = 1) -> None:
    """Raise unless a group consumer can read and commit a message produced just now.

    `security`: aiokafka's SASL arguments, for a secured broker (the probe logs in as its super user).
    `replication_factor`: of the probe topic; on a cluster, so that it survives the loss of a node.
    """
    marker = uuid.uuid4().hex.encode()
    settings = dict(security or {})
    async with asyncio.timeout(PROBE_TIMEOUT_S):
        await _ensure_topic(bootstrap, settings, replication_factor)
        await _produce(bootstrap, marker, settings)
        await _consume_and_commit(bootstrap, marker, settings)


def run_in_own_loop(factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to its end on a fresh event loop in a thread of its own.

    The broker is started and restarted from plain code and from inside running event loops (an
    async test restarting it); `asyncio.run` on the caller's thread would refuse the latter.
    """
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = asyncio.run(factory())
        except BaseException as exc:  # handed back to the caller's thread, raised there
            outcome["error"] = exc

    worker = threading.Thread(target=target, name=_PROBE_THREAD, daemon=True)
    worker.start()
    worker.join()
    if "error" in outcome:
        raise outcome["error"]
    value: T = outcome["value"]
    return value


def broker_ready(
    bootstrap: str, security: dict[str, Any] | None = None, *, replication_factor: int = 1
) -> tuple[bool, str]:
    """One probe: (True, "") when ready, else (False, why not)."""
    try:
        run_in_own_loop(lambda: probe(bootstrap, security, replication_factor))
    except Exception as exc:
        return False, f"{type(exc).__name__}: {exc}"
    return True, ""
