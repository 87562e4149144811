"""Starting and closing aiokafka clients so that neither leaves a connection half open nor
waits for ever on a broker that is gone."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import aiokafka.errors as kerr  # type: ignore[import-untyped]
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient  # type: ignore[import-untyped]

from rollout_adapters.kafka_errors import _translated

log = logging.getLogger(__name__)


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


__all__ = ["PRODUCER_FLUSH_S"]
