"""The sustained run's stand-in for a fleet's reporters, cheap enough not to take the machine it measures.

A real fleet's reporters run on the clusters; here one process sends 10,000 heartbeats a second on
the same 2 cores as the services under test. Built as a reporter builds one (a pydantic
`Heartbeat`, the envelope's encoder, one `send` and its future each) a heartbeat cost that process
about 40 µs of CPU: 0.4 cores taken from the monitors it measures. Here the value is written from a
template that gives the envelope encoder's bytes (`tests/bench/test_fleet_reporters.py` compares
them), and heartbeats go to the producer a batch per partition (on the key's partition, as
`memory_bus.kafka_partition` gives it), with one future per batch.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaProducer

from rollout_common import envelope
from rollout_common.heartbeat import Heartbeat

_TYPE = envelope.event_type(Heartbeat(cluster="-", ready=True, observed_at=0.0)).encode()
_SPEC_VERSION = envelope.SPEC_VERSION.encode()
_JSON = b"application/json"

Sent = Callable[[int, int, float], None]  # (partition, offset, produced at), once acknowledged


def heartbeat_record(
    cluster: str, *, ready: bool, event_id: str, at: float, source: str
) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """(key, value, headers) of a heartbeat observed at `at`, as `envelope.encode` writes it.
    For names and sources that JSON writes as they are (no quote, backslash or control character)."""
    value = (
        f'{{"kind":"heartbeat","cluster":"{cluster}","ready":{"true" if ready else "false"},'
        f'"observedAt":{at!r},"reporter":"{source}","detail":null,"controlPlaneVersion":null,"nodeVersion":null}}'
    )
    headers = [
        ("ce_specversion", _SPEC_VERSION),
        ("ce_id", event_id.encode()),
        ("ce_source", source.encode()),
        ("ce_type", _TYPE),
        ("ce_time", dt.datetime.fromtimestamp(at, tz=dt.UTC).isoformat().encode()),
        ("content-type", _JSON),
    ]
    return cluster.encode(), value.encode(), headers


class BatchedSender:
    """Heartbeats to one topic, a batch per partition: `add` them, `flush` sends what was added.
    `sent(partition, offset, at)` is told each heartbeat's offset once its batch is acknowledged."""

    def __init__(self, producer: AIOKafkaProducer, topic: str, *, sent: Sent) -> None:
        self._producer = producer
        self._topic = topic
        self._sent = sent
        self._open: dict[int, tuple[Any, list[float]]] = {}
        self._in_flight: set[asyncio.Future[Any]] = set()
        self._failed: BaseException | None = None

    async def add(
        self, key: bytes, value: bytes, headers: list[tuple[str, bytes]], *, partition: int, at: float
    ) -> None:
        builder, times = self._open.get(partition) or self._opened(partition)
        if builder.append(timestamp=None, key=key, value=value, headers=headers) is None:
            await self._send(partition)  # full
            builder, times = self._opened(partition)
            if builder.append(timestamp=None, key=key, value=value, headers=headers) is None:
                raise ValueError(f"a heartbeat of {len(value)} bytes does not fit an empty batch")
        times.append(at)

    async def flush(self) -> None:
        for partition in list(self._open):
            await self._send(partition)

    async def settled(self) -> None:
        """Until every batch sent so far is acknowledged (raises what a failed one raised)."""
        await self.flush()
        if self._in_flight:
            await asyncio.gather(*self._in_flight)
        if self._failed is not None:
            raise self._failed

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def _opened(self, partition: int) -> tuple[Any, list[float]]:
        self._open[partition] = (self._producer.create_batch(), [])
        return self._open[partition]

    async def _send(self, partition: int) -> None:
        builder, times = self._open.pop(partition)
        future = await self._producer.send_batch(builder, self._topic, partition=partition)
        self._in_flight.add(future)

        def acknowledged(done: asyncio.Future[Any]) -> None:
            self._in_flight.discard(done)
            if done.cancelled():
                return
            if (failed := done.exception()) is not None:
                self._failed = self._failed or failed
                return
            base = done.result().offset
            for index, at in enumerate(times):
                self._sent(partition, base + index, at)

        future.add_done_callback(acknowledged)


__all__ = ["BatchedSender", "heartbeat_record"]
