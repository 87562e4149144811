"""The retry policy for calls to the bus and the store: transient errors wait and try again."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from rollout_common.errors import TransientError

log = logging.getLogger(__name__)

T = TypeVar("T")

_FIRST_DELAY_S = 0.2
_MAX_DELAY_S = 5.0


async def retried(call: Callable[[], Awaitable[T]], *, what: str) -> T:
    """Call until it does not raise TransientError. Permanent errors and cancellation pass.

    No attempt limit: an executor that cannot reach Kafka or Redis can do nothing useful, and
    shutdown (cancellation) still interrupts the wait.
    """
    delay = _FIRST_DELAY_S
    while True:
        try:
            return await call()
        except TransientError as exc:
            wait = max(delay, exc.retry_after_s)
            log.warning("%s failed, retrying in %.1f s: %s", what, wait, exc)
            await asyncio.sleep(wait)
            delay = min(delay * 2, _MAX_DELAY_S)
