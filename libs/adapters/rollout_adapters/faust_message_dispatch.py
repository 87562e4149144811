"""faust hands each fetched record to its streams without four tasks per record, when it can.

faust (0.15) delivers every record through `Service.wait_first(callback(record),
suspend_flow.wait())`: four tasks (the callback, the flow's event, the consumer's stopped and
crashed events), an `asyncio.wait`, and three cancellations, for a callback that nearly always
finishes without waiting (it puts the event on a stream's queue that has room). In the health
monitor this was the largest share of a heartbeat's CPU after the monitor's own work: about 4.3
tasks created and 3 turns of the event loop, each with its `epoll` call, per heartbeat.

`install()` gives faust's aiokafka consumer a `wait_first` that first runs the callback up to its
first wait, in place. One that finishes there (the common case) is answered as `wait_first` would
answer it; one that waits (a full stream queue, a producer buffer to drain) goes on, from where it
stopped, inside faust's own `wait_first`, so a suspended flow or a stopping consumer still
interrupts it as before.
"""

from __future__ import annotations

import inspect
from collections.abc import Coroutine, Generator
from typing import Any

from faust.transport.drivers.aiokafka import Consumer
from mode.services import WaitResults

# faust's own method, as imported before `install` replaces it.
FAUST_WAIT_FIRST: Any = Consumer.wait_first


class _Resumed:
    """A coroutine that has already run to its first wait, awaited from there on."""

    def __init__(self, coro: Coroutine[Any, Any, Any], waiting_on: Any) -> None:
        self._coro = coro
        self._waiting_on = waiting_on

    def __await__(self) -> Generator[Any, Any, Any]:
        step = self._waiting_on
        while True:
            try:
                sent = yield step
            except GeneratorExit:
                self._coro.close()
                raise
            except BaseException as exc:  # a cancellation, say: the coroutine decides what it means
                try:
                    step = self._coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    step = self._coro.send(sent)
                except StopIteration as stop:
                    return stop.value


async def _rest(resumed: _Resumed) -> Any:
    return await resumed


async def _wait_first(self: Any, *coros: Any, timeout: Any = None) -> WaitResults:  # noqa: ASYNC109 (faust's signature)
    if timeout is not None or len(coros) != 2 or not inspect.iscoroutine(coros[0]):
        answer: WaitResults = await FAUST_WAIT_FIRST(self, *coros, timeout=timeout)
        return answer
    first, other = coros
    try:
        waiting_on = first.send(None)
    except BaseException as ended:
        if inspect.iscoroutine(other):
            other.close()  # never started: closed, so it is not reported as never awaited
        if not isinstance(ended, StopIteration):
            raise  # as faust's would, from the callback's task
        stop = ended
        if self._stopped.is_set() or self._crashed.is_set():
            return WaitResults([], [], True)
        return WaitResults([first], [stop.value], False)
    result: WaitResults = await FAUST_WAIT_FIRST(self, _rest(_Resumed(first, waiting_on)), other)
    return result


def install() -> None:
    """Make every faust aiokafka consumer of this process hand records over in place when it can."""
    if Consumer.wait_first is FAUST_WAIT_FIRST:
        Consumer.wait_first = _wait_first  # type: ignore[method-assign]


__all__ = ["FAUST_WAIT_FIRST", "install"]
