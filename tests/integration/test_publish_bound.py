"""`KafkaBus.publish` reports a broker that is gone within its bound, as a TransientError.

aiokafka's idempotent producer never expires a batch on a retriable error, so without a bound of
its own a publish to a stopped broker waits for ever: a reporter then never logs, never marks
itself unready, and every caller's retry loop stands still.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from local_servers import running

from rollout_adapters.kafka_bus import KafkaBus
from rollout_common.errors import TransientError
from rollout_common.topics.catalog import HEARTBEATS
from rollout_devenv import KafkaBroker

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def test_a_publish_to_a_stopped_broker_fails_transiently_within_the_bound(topic_prefix: str) -> None:
    with running(KafkaBroker(), what="the publish-bound test's Kafka broker") as broker:
        bus = KafkaBus(broker.bootstrap, client_id="publish-bound", publish_timeout_s=3.0)
        spec = HEARTBEATS.spec(f"{topic_prefix}.")
        try:
            await bus.ensure_topics([spec])
            await bus.publish(spec.name, key=b"c1", value=b"{}")
            await asyncio.to_thread(broker.stop)
            started = time.monotonic()
            with pytest.raises(TransientError, match="no acknowledgement within 3 s"):
                await bus.publish(spec.name, key=b"c1", value=b"{}")
            # The bound and the scheduling noise of a loaded machine; never the minutes it was.
            assert time.monotonic() - started < 30
        finally:
            await bus.close()
