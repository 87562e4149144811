"""faust's consumer with fetches the broker may hold until a batch of records has arrived.

faust (0.15) builds aiokafka's consumer with `fetch_min_bytes` 1: the broker answers a fetch as
soon as one record is there. A fleet at rest sends heartbeats as a steady trickle, so each fetch
brought a handful, and each went through aiokafka's fetch round, faust's consumer thread, the hand
over to the worker's loop and a turn of the agent: at 5,000 heartbeats a second into one worker,
about 90 µs of CPU per heartbeat against about 40 µs for the same heartbeats read from a backlog.
With a minimum the broker holds the fetch until that many bytes or `max_wait_ms`, whichever
comes first; a heartbeat waits at most that long longer before it is judged.

`FetchWaitTransport` is faust's Kafka transport whose consumer thread sets the two on the
consumer it builds, before that consumer starts (aiokafka reads them when it starts its fetcher).
An app that uses it says what to wait for in its `fetch_wait`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from faust.transport.drivers import aiokafka as faust_kafka


@dataclass(frozen=True)
class FetchWait:
    min_bytes: int
    max_wait_ms: int


class _FetchWaitThread(faust_kafka.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        wait: FetchWait | None = getattr(self.app, "fetch_wait", None)
        if wait is not None:
            if not (hasattr(consumer, "_fetch_min_bytes") and hasattr(consumer, "_fetch_max_wait_ms")):
                # an aiokafka that keeps them elsewhere: say so rather than silently fetch one by one
                raise RuntimeError("aiokafka's consumer has no _fetch_min_bytes/_fetch_max_wait_ms to set")
            consumer._fetch_min_bytes = wait.min_bytes
            consumer._fetch_max_wait_ms = wait.max_wait_ms
        return consumer


class _FetchWaitConsumer(faust_kafka.Consumer):
    def _new_consumer_thread(self) -> faust_kafka.AIOKafkaConsumerThread:
        return _FetchWaitThread(self, loop=self.loop, beacon=self.beacon)


class FetchWaitTransport(faust_kafka.Transport):
    Consumer = _FetchWaitConsumer


__all__ = ["FetchWait", "FetchWaitTransport"]
