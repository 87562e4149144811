"""Ctrl-C at any moment of a command: a prompt exit with the command's code, never a traceback.

A Ctrl-C used to reach the command wherever it happened to be: in the middle of an import (a
traceback, then death by the signal), between the event loop's start and its handler, or in a
Kafka client's close that waited 40 s on a frozen broker. Now:

- `held()` blocks SIGINT from the first line of `main` on: the kernel keeps a Ctrl-C pending
  while the modules load and the arguments are parsed, and `pressed()` tells whether one came;
- a plain command gets it as KeyboardInterrupt inside `allowed()`;
- an async command runs in `run()`: the signal is let through only once the event loop's handler
  is in place, and it cancels the command's task; whatever the task still does (closing its
  clients) gets `GRACE_S`, then the command ends anyway, leaving what is still open to the exit.

What comes before `main` (the interpreter starting, a few tens of milliseconds) is Python's own:
a Ctrl-C then ends the process as it ends any Python program.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Awaitable, Coroutine, Iterator
from typing import Any

from rollout_adapters.shutdown import bounded_close

# How long closing one client may take: a broker that does not answer (frozen, or gone without a
# word) would keep a group's leave request waiting 40 s. The member it leaves behind expires with
# its session; the CLI's producers hold nothing unacknowledged when they close.
CLOSE_S = 2.0
# After a Ctrl-C, how long the command's task may take to finish (closing its connections).
GRACE_S = 3.0
# How long the tasks a command left behind (a client's background work) get to end once cancelled.
LEFTOVER_S = 1.0

_SIGINT = {signal.SIGINT}


@contextlib.contextmanager
def held() -> Iterator[None]:
    """SIGINT blocked for the block; a Ctrl-C that arrives meanwhile waits, pending, for `allowed`
    or `run`. One still pending at the end is dropped (the command is over) and the caller's
    signal mask is restored."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGINT)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_BLOCK, _SIGINT)
        _drop_pending()
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def pressed() -> bool:
    """Whether a Ctrl-C is waiting (it is consumed: the caller exits on it)."""
    if signal.SIGINT not in signal.sigpending():
        return False
    _drop_pending()
    return True


@contextlib.contextmanager
def allowed() -> Iterator[None]:
    """SIGINT delivered as KeyboardInterrupt for the block (a pending one at once), held again after it."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGINT)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_BLOCK, _SIGINT)


class StoppedByCtrlCError(Exception):
    """The command's task was stopped by Ctrl-C."""


def run(command: Coroutine[Any, Any, int]) -> int:
    """Run `command` on a new event loop with SIGINT cancelling it; raises StoppedByCtrlCError on Ctrl-C.

    Called with SIGINT held (inside `held()`), as `main` calls every command."""
    loop = asyncio.new_event_loop()
    # A client abandoned after the grace period would report itself destroyed while pending.
    loop.set_exception_handler(_quiet)
    try:
        return loop.run_until_complete(_supervised(command))
    finally:
        _end_leftovers(loop)
        loop.close()


async def _supervised(command: Coroutine[Any, Any, int]) -> int:
    loop = asyncio.get_running_loop()
    task = loop.create_task(command)
    interrupted = asyncio.Event()

    def on_sigint() -> None:
        interrupted.set()
        task.cancel()  # a second Ctrl-C cancels again, cutting a close short

    # Signals reach the main thread only; a command run from another thread (a test) has none.
    handles = threading.current_thread() is threading.main_thread()
    if handles:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGINT)  # a Ctrl-C held so far arrives now
    try:
        waiting = loop.create_task(interrupted.wait())
        await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if interrupted.is_set():
            # The task may swallow a cancellation (a client's close does); it gets GRACE_S, no more.
            await asyncio.wait({task}, timeout=GRACE_S)
            if task.done() and not task.cancelled():
                task.exception()  # retrieved: an error after Ctrl-C is not reported
            raise StoppedByCtrlCError
        return task.result()
    finally:
        if handles:
            signal.pthread_sigmask(signal.SIG_BLOCK, _SIGINT)
            loop.remove_signal_handler(signal.SIGINT)


async def closed(closing: Awaitable[object]) -> None:
    """Wait for `closing` (a client's close) at most CLOSE_S, as the services bound theirs; a close
    that fails or takes longer is left to the exit, quietly (`async_command`)."""
    await bounded_close("a client", closing, timeout_s=CLOSE_S)


def _end_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what the command left running and give it LEFTOVER_S; what does not end is dropped."""
    leftovers = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in leftovers:
        task.cancel()
    if leftovers:
        loop.run_until_complete(asyncio.wait(leftovers, timeout=LEFTOVER_S))
    for task in leftovers:
        if task.done() and not task.cancelled():
            task.exception()
    with contextlib.suppress(Exception):
        loop.run_until_complete(asyncio.wait_for(loop.shutdown_asyncgens(), LEFTOVER_S))


def _quiet(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    logging.getLogger(__name__).debug("left at exit: %s", context.get("message"))


def _drop_pending() -> None:
    while signal.SIGINT in signal.sigpending():
        signal.sigtimedwait(_SIGINT, 0)


__all__ = ["CLOSE_S", "GRACE_S", "StoppedByCtrlCError", "allowed", "closed", "held", "pressed", "run"]
