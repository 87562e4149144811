"""Waiting for the planner's answer to one command: its CommandAck on the progress topic (OPS-3).

The listener joins the progress topic and holds a read position *before* the command is
published, so an answer that comes back within milliseconds is not missed; it then reads
forward until an acknowledgement carries the command's id.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from rollout_adapters.kafka_bus import KafkaBus, KafkaConsumer
from rollout_common import envelope
from rollout_common.commands import CommandAck
from rollout_common.errors import InvalidInputError
from rollout_common.topics.catalog import PROGRESS


@dataclass(frozen=True, slots=True)
class Answer:
    accepted: bool
    reason: str


def listener_group(topic_prefix: str) -> str:
    # Under the operator's prefixed group ACL (`rollout-watch-`, docs/security.md), and a group of
    # its own: it moves nobody else's position.
    return f"{topic_prefix}rollout-watch-ack-{uuid.uuid4().hex[:8]}"


class AckListener:
    """Reads the progress topic from "now" on; `answer(command_id)` waits for that command's ack."""

    def __init__(self, bus: KafkaBus, *, topic_prefix: str) -> None:
        self._consumer: KafkaConsumer = bus.consumer(
            [topic_prefix + PROGRESS.name], group=listener_group(topic_prefix), from_beginning=False
        )

    async def start(self) -> None:
        """Joined and positioned: every record published from now on will be read."""
        await self._consumer.positioned()

    async def answer(self, command_id: str, *, timeout_s: float) -> Answer | None:
        """The planner's answer, or None when none came within `timeout_s`."""
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    for record in await self._consumer.poll(max_records=200, timeout_s=0.5):
                        ack = _ack(record.value, record.headers)
                        if ack is not None and ack.command_id == command_id:
                            return Answer(accepted=ack.accepted, reason=ack.reason)
        except TimeoutError:
            return None

    async def close(self) -> None:
        await self._consumer.close()


def _ack(value: bytes, headers: Mapping[str, bytes]) -> CommandAck | None:
    try:
        _, message = envelope.decode(value, headers, PROGRESS.models)
    except InvalidInputError:
        return None  # not ours to judge: the planner dead-letters nothing on its own output
    return message if isinstance(message, CommandAck) else None


__all__ = ["AckListener", "Answer", "listener_group"]
