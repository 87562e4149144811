"""Publishing events as the services do: the same envelope and topic catalog, messages checked
against the planner's size bounds before the first is sent.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from rollout_adapters.kafka_bus import KafkaBus
from rollout_cli import ctrl_c
from rollout_cli.clients import CONNECT_TIMEOUT_S, kafka_bus, kafka_errors
from rollout_cli.exit_codes import BadInputError
from rollout_cli.progress_bars import ProgressCount
from rollout_common import envelope
from rollout_common.topics import ALL
from rollout_common.topics.catalog import TopicDef

_PUBLISH_CHUNK = 500
# (key, value, headers) of one message, ready to send
_Encoded = tuple[bytes, bytes, dict[str, bytes]]


async def publish(
    args: argparse.Namespace,
    topic: TopicDef,
    items: Sequence[tuple[BaseModel, str]],
    *,
    create_topics: bool = False,
    progress: ProgressCount | None = None,
    bus: KafkaBus | None = None,
) -> None:
    """Publish `items` on `topic`; closes the bus afterwards unless it was given."""
    encoded = [encode_checked(args, topic, model, event_id) for model, event_id in items]
    own = bus is None
    client = kafka_bus(args) if bus is None else bus
    name = args.topic_prefix + topic.name
    try:
        with kafka_errors(args, topic=name, hint="run `rollout apply` or start the planner first"):
            await _connect_and_send_first(client, args, name=name, encoded=encoded, create_topics=create_topics)
            await _send_rest_in_chunks(client, name=name, encoded=encoded, progress=progress)
    finally:
        if own:
            await ctrl_c.closed(client.close())


async def _send(client: KafkaBus, name: str, message: _Encoded) -> None:
    key, value, headers = message
    await client.publish(name, key=key, value=value, headers=headers)


async def _connect_and_send_first(
    client: KafkaBus, args: argparse.Namespace, *, name: str, encoded: list[_Encoded], create_topics: bool
) -> None:
    async with asyncio.timeout(CONNECT_TIMEOUT_S):
        if create_topics:
            await client.ensure_topics([t.spec(args.topic_prefix) for t in ALL])
        if encoded:
            await _send(client, name, encoded[0])  # connects, and fails fast on a wrong address or topic


async def _send_rest_in_chunks(
    client: KafkaBus, *, name: str, encoded: list[_Encoded], progress: ProgressCount | None
) -> None:
    # The rest in chunks sent together: one round trip per chunk instead of per message, and a
    # deadline per chunk so a large fleet is not cut off by the connect timeout.
    for start in range(1, len(encoded), _PUBLISH_CHUNK):
        chunk = encoded[start : start + _PUBLISH_CHUNK]
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            await asyncio.gather(*(_send(client, name, message) for message in chunk))
        if progress is not None:
            progress.advance(len(chunk) + (1 if start == 1 else 0))


def encode_checked(args: argparse.Namespace, topic: TopicDef, model: BaseModel, event_id: str) -> _Encoded:
    """(key, value, headers) of one message; one that every consumer would refuse for its size is
    refused here, before anything is published (it would be dead-lettered, never answered)."""
    value, headers = envelope.encode(model, event_id=event_id, source=args.source, at=time.time())
    problem = envelope.size_problem(value, headers)
    if problem is not None:
        shown = event_id if len(event_id) <= 40 else f"{event_id[:40]}..."
        raise BadInputError(f"{type(model).__name__} {shown}: {problem}; nothing was published")
    return topic.key(model).encode(), value, headers


def validated(model: type[Any], **fields: Any) -> Any:
    try:
        return model(**fields)
    except ValidationError as exc:
        raise BadInputError("; ".join(_problem(e["loc"], e["msg"]) for e in exc.errors())) from exc


def _problem(loc: tuple[int | str, ...], message: str) -> str:
    where = ".".join(map(str, loc)) or "value"
    message = message.removeprefix("Value error, ")
    # the domain validators often name the field themselves
    return message if message.startswith(f"{where}:") else f"{where}: {message}"


def user() -> str:
    return os.environ.get("USER") or "unknown"


__all__ = ["encode_checked", "publish", "user", "validated"]
