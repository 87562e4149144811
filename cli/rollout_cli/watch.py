"""`rollout watch`: the progress topic followed, as a live status screen or one line per event."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import sys
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any

from rich.console import Console
from rich.live import Live

from rollout_cli import ctrl_c, help_text
from rollout_cli.async_command import async_command
from rollout_cli.clients import CONNECT_TIMEOUT_S, kafka_bus, kafka_errors
from rollout_cli.dashboard import status_view
from rollout_cli.exit_codes import ExitCode
from rollout_cli.options import common_options, positive_int
from rollout_cli.progress_model import ProgressModel
from rollout_cli.status import status_if_any
from rollout_common import envelope
from rollout_common.errors import InvalidInputError
from rollout_common.ports import Consumer, Record
from rollout_common.topics.catalog import PROGRESS

_RECENT_EVENTS = 6
# how often the live screen takes the metric checks' latest values from the stored status (CHK-2):
# check results do not travel on the progress topic; a slow or absent Redis leaves the last values
CHECKS_REFRESH_S = 5.0
_STORED_WAIT_S = 2.0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    common = common_options()
    watch = help_text.command(
        sub,
        "watch",
        parents=[common],
        summary="live status screen moved on by progress events (one line per event with --plain)",
        description="Follows the progress topic: transitions, waits, acknowledgements. Ctrl-C stops it (exit 0).",
        examples=["rollout watch", "rollout watch --plain --from-beginning --count 20"],
    )
    watch.add_argument("--from-beginning", action="store_true", help="replay the topic's history first")
    watch.add_argument("--count", type=positive_int, help="exit after this many events, e.g. --count 20")
    watch.add_argument(
        "--plain", action="store_true", help="one line per event (the default when stdout is not a terminal)"
    )
    watch.set_defaults(handler=async_command(_watch), on_ctrl_c=ExitCode.OK)


async def _watch(args: argparse.Namespace) -> int:
    model = await _live_model(args)
    bus = kafka_bus(args)
    topic = args.topic_prefix + PROGRESS.name
    # A group of its own: every watcher sees every event, and none moves another's position. Under
    # the topic prefix, as the operator's ACL (prefix `rollout-watch-`, docs/security.md) expects.
    group = f"{args.topic_prefix}rollout-watch-{uuid.uuid4().hex[:8]}"
    consumer = bus.consumer([topic], group=group, from_beginning=args.from_beginning)
    try:
        with kafka_errors(args, topic=topic):
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                first = await consumer.poll(max_records=100, timeout_s=0.1)  # joins; fails fast on a bad address
            if model is None:
                await _watch_plain(consumer, first, count=args.count)
            else:
                await _watch_live(
                    consumer,
                    first,
                    model,
                    count=args.count,
                    title=f"rollout watch · {topic}",
                    stored=partial(status_if_any, args),
                )
    finally:
        await ctrl_c.closed(bus.close())
    return 0


async def _live_model(args: argparse.Namespace) -> ProgressModel | None:
    """The model the live screen draws; None for one line per event (--plain, or stdout not a terminal)."""
    if args.plain or not sys.stdout.isatty():
        return None
    # The stored status is the best start; without it the screen fills in as events arrive.
    seed = await status_if_any(args)
    return ProgressModel(seed, now=time.time())


async def _watch_plain(consumer: Consumer, first: list[Record], *, count: int | None) -> None:
    seen, records = 0, first
    while True:
        for record in records:
            print(_progress_line(record.value, record.headers), flush=True)
            seen += 1
            if count is not None and seen >= count:
                return
        records = await consumer.poll(max_records=100, timeout_s=1.0)


async def _watch_live(
    consumer: Consumer,
    first: list[Record],
    model: ProgressModel,
    *,
    count: int | None,
    title: str,
    stored: Callable[[], Awaitable[Mapping[str, Any] | None]],
) -> None:
    recent: deque[str] = deque(maxlen=_RECENT_EVENTS)
    console = Console()

    def screen() -> Any:
        footer = "Ctrl-C stops; batches are estimates until the next `rollout status`"
        clock = float(model.doc["now"])
        return status_view(model.doc, clock=clock, title=title, recent=list(recent), footer=footer)

    with Live(screen(), console=console, auto_refresh=False) as live:
        await _follow_live(
            consumer,
            first,
            model,
            recent=recent,
            count=count,
            stored=stored,
            redraw=lambda: live.update(screen(), refresh=True),
        )


async def _follow_live(
    consumer: Consumer,
    first: list[Record],
    model: ProgressModel,
    *,
    recent: deque[str],
    count: int | None,
    stored: Callable[[], Awaitable[Mapping[str, Any] | None]],
    redraw: Callable[[], None],
) -> None:
    """Apply events to `model` as they come, and the stored check results every CHECKS_REFRESH_S."""
    seen, records = 0, first
    checks_read = time.monotonic()
    while True:
        if time.monotonic() - checks_read >= CHECKS_REFRESH_S:
            model.take_checks(await _bounded(stored))
            checks_read = time.monotonic()
            redraw()
        for record in records:
            recent.append(_apply_event(model, record))
            seen += 1
            if count is not None and seen >= count:
                redraw()
                return
        if records:
            redraw()
        records = await consumer.poll(max_records=100, timeout_s=1.0)


async def _bounded(stored: Callable[[], Awaitable[Mapping[str, Any] | None]]) -> Mapping[str, Any] | None:
    try:
        return await asyncio.wait_for(stored(), _STORED_WAIT_S)
    except TimeoutError:
        return None


def _apply_event(model: ProgressModel, record: Record) -> str:
    line = _progress_line(record.value, record.headers)
    try:
        meta, event = envelope.decode(record.value, record.headers, PROGRESS.models)
    except InvalidInputError:
        return line
    try:
        model.apply(event.model_dump(mode="json", by_alias=True), at=_epoch(meta.time))
    except Exception as exc:  # an event the screen cannot place must not end the watch (BUS-4)
        return f"{line} (not shown on the screen: {type(exc).__name__})"
    return line


def _epoch(text: str) -> float | None:
    try:
        return dt.datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def _progress_line(value: bytes, headers: Any) -> str:
    try:
        meta, model = envelope.decode(value, headers, PROGRESS.models)
    except InvalidInputError as exc:
        return f"(unreadable progress event: {exc})"
    body = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    kind = body.pop("kind")
    where = "/".join(str(body.pop(k)) for k in ("rolloutId", "stage", "track") if k in body)
    rest = " ".join(f"{k}={_compact(v)}" for k, v in body.items())
    return f"{meta.time[11:19] or '--:--:--'} {kind:<18} {where} {rest}".rstrip()


def _compact(value: Any) -> str:
    if isinstance(value, list | dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


__all__ = ["register"]
