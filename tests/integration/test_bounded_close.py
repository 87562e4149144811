"""`bounded_close` ends within its bound even when the close refuses to: a consumer joined to a
group, the broker frozen (SIGSTOP), so its leave request is never answered (OPS-, BUS-).

aiokafka's close of a joined consumer waits for the broker's answer to the leave request (its
request timeout, 40 s) and swallows the cancellation `asyncio.wait_for` sends it, so a bound made
with `wait_for` waited those 40 s: a SIGTERM'd service outlived its supervisor's patience.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from local_servers import frozen

from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.shutdown import CLOSE_S, abandoned_closes, bounded_close, unless_stopped
from rollout_common.topics.catalog import HEARTBEATS
from rollout_devenv import KafkaBroker

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

# The bound and the scheduling noise of a loaded machine; never the 40 s of the request timeout.
_SLACK_S = 3.0


async def _closed_after_resume(bus: KafkaBus) -> None:
    """The broker answers again: what was abandoned ends, and the bus closes what is left, so no
    connection outlives the test."""
    await asyncio.gather(*abandoned_closes(), return_exceptions=True)
    await bus.close()


async def _joined(bus: KafkaBus, topic: str, group: str) -> object:
    await bus.ensure_topics([HEARTBEATS.spec(topic.removesuffix(HEARTBEATS.name))])
    consumer = bus.consumer([topic], group=group)
    await consumer.positioned()
    assert consumer.assignment(), "the consumer never joined its group"
    return consumer


async def test_closing_a_joined_consumer_with_the_broker_frozen_ends_within_close_s(
    kafka_broker: KafkaBroker, topic_prefix: str
) -> None:
    prefix = f"{topic_prefix}."
    bus = KafkaBus(kafka_broker.bootstrap, client_id="bounded-close")
    consumer = await _joined(bus, prefix + HEARTBEATS.name, f"{topic_prefix}-group")
    with frozen(kafka_broker):
        started = time.monotonic()
        await bounded_close("the consumer", consumer.close())  # type: ignore[attr-defined]
        took = time.monotonic() - started
    await _closed_after_resume(bus)
    assert took < CLOSE_S + _SLACK_S, f"bounded_close took {took:.1f} s with a {CLOSE_S:g} s bound"


async def test_closing_a_bus_with_a_joined_consumer_and_the_broker_frozen_ends_within_close_s(
    kafka_broker: KafkaBroker, topic_prefix: str
) -> None:
    """The services' own call: the whole bus (consumers, producer, admin client) at once."""
    prefix = f"{topic_prefix}."
    bus = KafkaBus(kafka_broker.bootstrap, client_id="bounded-close")
    await _joined(bus, prefix + HEARTBEATS.name, f"{topic_prefix}-group")
    await bus.publish(prefix + HEARTBEATS.name, key=b"c-1", value=b"{}")
    with frozen(kafka_broker):
        started = time.monotonic()
        await bounded_close("the Kafka clients", bus.close())
        took = time.monotonic() - started
    await _closed_after_resume(bus)
    assert took < CLOSE_S + _SLACK_S, f"bounded_close took {took:.1f} s with a {CLOSE_S:g} s bound"


async def test_closing_a_polling_consumer_with_the_broker_frozen_ends_within_close_s(
    kafka_broker: KafkaBroker, topic_prefix: str
) -> None:
    """As a service stops: frozen while it polls, the poll cut short by the stop (`unless_stopped`),
    then the consumer closed."""
    prefix = f"{topic_prefix}."
    bus = KafkaBus(kafka_broker.bootstrap, client_id="bounded-close")
    consumer = await _joined(bus, prefix + HEARTBEATS.name, f"{topic_prefix}-group")
    stop = asyncio.Event()
    with frozen(kafka_broker):
        polling = asyncio.create_task(_polled_until(consumer, stop))
        # A stop that comes while the polls go unanswered; the wait places it, it waits for nothing.
        await asyncio.sleep(3.0)
        stop.set()
        await polling
        started = time.monotonic()
        await bounded_close("the consumer", consumer.close())  # type: ignore[attr-defined]
        took = time.monotonic() - started
    await _closed_after_resume(bus)
    assert took < CLOSE_S + _SLACK_S, f"bounded_close took {took:.1f} s with a {CLOSE_S:g} s bound"


async def _polled_until(consumer: object, stop: asyncio.Event) -> None:
    while not stop.is_set():
        await unless_stopped(consumer.poll(timeout_s=1.0), stop)  # type: ignore[attr-defined]
