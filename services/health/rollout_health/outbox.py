"""Where the monitor's output goes: a port, so the agent can be tested without a broker."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import faust


class Outbox(Protocol):
    async def send(self, topic: str, *, key: bytes | None, value: bytes, headers: Mapping[str, bytes]) -> None: ...


class FaustOutbox:
    """Sends through the faust app's own producer, as raw bytes (the envelope is already applied)."""

    def __init__(self, app: faust.App) -> None:
        self._app = app
        self._topics: dict[str, faust.TopicT] = {}

    async def send(self, topic: str, *, key: bytes | None, value: bytes, headers: Mapping[str, bytes]) -> None:
        if topic not in self._topics:
            self._topics[topic] = self._app.topic(topic, key_serializer="raw", value_serializer="raw")
        # Awaited to the broker's ack: a readiness change must not sit in a buffer when we move on.
        pending = await self._topics[topic].send(key=key, value=value, headers=dict(headers))
        await pending
