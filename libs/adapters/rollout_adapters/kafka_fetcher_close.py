"""Closing an aiokafka consumer while the broker is down must not raise `CancelledError`.

aiokafka (0.14) `Fetcher.close` cancels its fetch requests in flight and awaits each. A request
that failed because the broker is gone sleeps out its retry back-off outside the part that
handles cancellation, so the await re-raises that task's `CancelledError` out of `close`, then
out of `AIOKafkaConsumer.stop`, and the requests after it are neither cancelled nor awaited.

In the health monitor this hung the faust worker on SIGTERM: faust stops its consumer in a thread
of its own, the `CancelledError` ends that thread's shutdown before it reports itself stopped, and
the worker waits for it until its supervisor kills it (`_STOP_GRACE_S`, 20 s). A `KafkaBus`
consumer closed with the broker down got the same `CancelledError` out of its close.

`install()` wraps `Fetcher.close`: a `CancelledError` that does not come from cancelling the
closing task itself is that of a request it cancelled; the remaining requests are cancelled and
awaited, and close returns.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka.consumer.fetcher import Fetcher  # type: ignore[import-untyped]

# aiokafka's own close, as imported before `install` wraps it.
CLIENT_CLOSE: Any = Fetcher.close


async def _close(fetcher: Any) -> None:
    try:
        await CLIENT_CLOSE(fetcher)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # the closing task itself is being cancelled: that one is not ours to swallow
        pending = list(fetcher._pending_tasks)
        for request in pending:
            request.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


def install() -> None:
    """Make every aiokafka consumer of this process close cleanly with the broker down."""
    if Fetcher.close is CLIENT_CLOSE:
        Fetcher.close = _close


__all__ = ["CLIENT_CLOSE", "install"]
