"""Where the monitor's output goes: a port, so the agent can be tested without a broker."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Protocol

import faust

from rollout_adapters.faust_producer import client_producer


class Outbox(Protocol):
    async def send(self, topic: str, *, key: bytes | None, value: bytes, headers: Mapping[str, bytes]) -> None:
        """Sent and acknowledged by the broker."""

    async def send_soon(
        self, topic: str, *, key: bytes | None, value: bytes, headers: Mapping[str, bytes]
    ) -> asyncio.Future[Any]:
        """Queued in the producer (in order per partition); the future resolves on the broker's ack."""


class FaustOutbox:
    """Sends through the faust app's own producer, as raw bytes (the envelope is already applied):
    straight through aiokafka's producer under it once started, through a faust topic before."""

    def __init__(self, app: faust.App) -> None:
        self._app = app
        self._topics: dict[str, faust.TopicT] = {}

    async def send(self, topic: str, *, key: bytes | None, value: bytes, headers: Mapping[str, bytes]) -> None:
        await (await self.send_soon(topic, key=key, value=value, headers=headers))

    async def send_soon(
        self, topic: str, *, key: bytes | None, value: bytes, headers: Mapping[str, bytes]
    ) -> asyncio.Future[Any]:
        client = client_producer(self._app)
        if client is not None:
            # aiokafka's send: the record queued in order per partition (the key's, as faust would
            # choose), one future for its ack; faust's own send adds a message object, a buffer
            # step and callbacks of its own, tens of µs per record. faust flushes this producer
            # before it commits an offset all the same.
            delivery: asyncio.Future[Any] = await client.send(topic, value, key=key, headers=list(headers.items()))
            return delivery
        if topic not in self._topics:
            self._topics[topic] = self._app.topic(topic, key_serializer="raw", value_serializer="raw")
        sent = await self._topics[topic].send(key=key, value=value, headers=dict(headers))
        # faust's FutureMessage, a future already: done on the broker's ack (ensure_future returns it)
        return asyncio.ensure_future(sent)
