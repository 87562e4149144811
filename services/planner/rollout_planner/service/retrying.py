"""Waiting out the store's and the broker's transient failures, and waking at once on a stop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from rollout_common.errors import TransientError

log = logging.getLogger("rollout.planner")

T = TypeVar("T")


class Retrier:
    """Retries transient failures with capped exponential back-off; permanent ones propagate.

    `on_failure` runs at each transient failure (the planner reports itself not ready meanwhile).
    """

    def __init__(
        self, *, backoff_s: float, backoff_max_s: float, stopping: asyncio.Event, on_failure: Callable[[], None]
    ) -> None:
        self._backoff_s = backoff_s
        self._backoff_max_s = backoff_max_s
        self._stopping = stopping
        self._on_failure = on_failure

    async def call(self, doing: str, call: Callable[[], Awaitable[T]]) -> T:
        delay = self._backoff_s
        while True:
            try:
                return await call()
            except TransientError as exc:
                self._on_failure()
                if self._stopping.is_set():
                    raise
                log.warning(
                    "transient failure; retrying", extra={"doing": doing, "error": str(exc), "retry_in_s": delay}
                )
                await self.pause(delay)
                delay = min(delay * 2, self._backoff_max_s)

    async def pause(self, seconds: float) -> None:
        """Wait, but wake at once when asked to stop."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)


__all__ = ["Retrier"]
