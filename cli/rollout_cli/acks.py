"""Waiting for the planner's answer to one command: its CommandAck on the progress topic (OPS-3).

The listener joins the progress topic and holds a read position *before* the command is
published, so an answer that comes back within milliseconds is not missed; it then reads
forward until an acknowledgement carries the command's id.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from rollout_adapters.kafka_bus import KafkaBus, KafkaConsumer
from rollout_cli import ctrl_c
from rollout_cli.clients import CONNECT_TIMEOUT_S, kafka_bus, kafka_errors
from rollout_cli.exit_codes import ExitCode, NoAnswerError
from rollout_cli.publishing import encode_checked, publish
from rollout_common import envelope
from rollout_common.commands import CommandAck
from rollout_common.errors import InvalidInputError
from rollout_common.events import OperatorCommand, SequenceChange
from rollout_common.topics.catalog import OPERATOR_COMMANDS, PROGRESS


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


async def send_command(args: argparse.Namespace, command: OperatorCommand | SequenceChange, *, what: str) -> int:
    """Publish an operator command; unless --no-wait, wait for its acknowledgement and report it."""
    if args.no_wait:
        await publish(args, OPERATOR_COMMANDS, [(command, command.command_id)])
        print(f"published {what}; the planner acknowledges it on the progress topic")
        return ExitCode.OK
    answer = await published_and_answered(args, command)
    return report(answer, what=what, command_id=command.command_id, timeout_s=args.timeout)


async def published_and_answered(args: argparse.Namespace, command: OperatorCommand | SequenceChange) -> Answer | None:
    encode_checked(args, OPERATOR_COMMANDS, command, command.command_id)  # one too large is refused before anything
    bus = kafka_bus(args)
    listener = AckListener(bus, topic_prefix=args.topic_prefix)
    try:
        with kafka_errors(args, topic=args.topic_prefix + PROGRESS.name):
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                await listener.start()  # before publishing: an answer in milliseconds is not missed
        await publish(args, OPERATOR_COMMANDS, [(command, command.command_id)], bus=bus)
        with kafka_errors(args, topic=args.topic_prefix + PROGRESS.name):
            return await listener.answer(command.command_id, timeout_s=args.timeout)
    finally:
        await ctrl_c.closed(bus.close())


def report(answer: Answer | None, *, what: str, command_id: str, timeout_s: float) -> int:
    if answer is None:
        raise NoAnswerError(
            f"{what} was published, but the planner did not answer within {timeout_s:g} s: check that it runs "
            f"(`rollout status` shows when it last decided), then look for the answer with "
            f"`rollout watch --plain --from-beginning | grep {command_id}`"
        )
    if not answer.accepted:
        print(f"rejected: {what}: {answer.reason}", file=sys.stderr)
        return ExitCode.REJECTED
    print(f"accepted: {what}: {answer.reason}")
    return ExitCode.OK


__all__ = ["AckListener", "Answer", "listener_group", "published_and_answered", "report", "send_command"]
