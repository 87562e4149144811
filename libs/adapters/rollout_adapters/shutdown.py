"""Bounded shutdown: a SIGTERM must end a service even while Kafka or Redis is unreachable.

Two holes kept services running for many minutes after SIGTERM with the broker gone: a call
retried forever (a poll, a publish) that never looked at the stop signal, and a client's close
waiting on a dead server (leaving the group, flushing a producer). `unless_stopped` races the
first against the stop event; `bounded_close` gives the second `CLOSE_S`. Every service's stop
event is `stop_on_signals`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
CLOSE_S = 5.0


def stop_on_signals() -> asyncio.Event:
    """An event that SIGTERM or SIGINT sets, in the running loop: how every service learns to stop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    return stop


async def unless_stopped(work: Awaitable[T], stop: asyncio.Event) -> T | None:
    """`work`'s result, or None (and `work` cancelled) as soon as `stop` is set."""
    task = asyncio.ensure_future(work)
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
        return task.result() if task.done() else None
    finally:
        stopping.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def bounded_close(what: str, closing: Awaitable[object], *, timeout_s: float = CLOSE_S) -> None:
    """Close a client, giving up after `timeout_s`; a failure is logged, never raised, so the
    other clients still get closed.

    Not `asyncio.wait_for`: on a timeout it cancels the close and then waits for it to end, and
    aiokafka's closes swallow the cancellation (a joined consumer's close waits out its 40 s
    request timeout for a leave answer a frozen broker never sends). A close past its bound is
    abandoned instead: it goes on in the background (`abandoned_closes`) and ends with the process.
    """
    task = asyncio.ensure_future(closing)
    await asyncio.wait({task}, timeout=timeout_s)
    if not task.done():
        log.warning("closing %s took over %.0f s; left it to the exit", what, timeout_s)
        _abandoned.add(task)
        task.add_done_callback(_ended)
        return
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.warning("closing %s failed: %s", what, exc)


# Abandoned closes, referenced until they end: the event loop keeps only weak references to tasks.
_abandoned: set[asyncio.Future[object]] = set()


def abandoned_closes() -> frozenset[asyncio.Future[object]]:
    """The closes `bounded_close` gave up on that are still running."""
    return frozenset(_abandoned)


def _ended(task: asyncio.Future[object]) -> None:
    _abandoned.discard(task)
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.warning("an abandoned close failed: %s", exc)


__all__ = ["CLOSE_S", "abandoned_closes", "bounded_close", "unless_stopped"]
