"""A renewable lease on one upgrade target, built from `put_if_absent` with a TTL alone.

The store port can create a key with a TTL but not extend one, so a lease is a run of keys, one
per period of `period_s` seconds (`<key>:<period number>`). The holder owns the current period's
key and, always one period ahead, the next one's; renewing (every third of a period) claims the
next period in turn. A contender can only win a period nobody claimed ahead of time, so it takes
over a dead holder's target between one and two periods after the holder's last renewal, and
never while the holder renews. Every step is a single atomic `SET NX EX`: no clock comparison
between hosts beyond agreeing on the period number (a skew well under a period is harmless).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Awaitable, Callable
from typing import TypeVar

from rollout_common.errors import RolloutError
from rollout_common.ports import Store

log = logging.getLogger(__name__)

T = TypeVar("T")
Clock = Callable[[], float]

# Period keys outlive their period a little, so a holder renewing late still finds its own key.
_TTL_PERIODS = 3


class LeaseLostError(Exception):
    """Another executor holds the target now; the work done under the lease was stopped."""


class Lease:
    def __init__(self, store: Store, *, key: str, token: str, period_s: int, clock: Clock) -> None:
        self._store = store
        self._key = key
        self._token = token.encode()
        self._period_s = period_s
        self._clock = clock
        self._mine: set[str] = set()

    async def acquire(self) -> bool:
        """True when this lease now holds the target (or held it already)."""
        current = self._period()
        if not await self._hold(current):
            return False
        if await self._hold(current + 1):
            return True
        await self.release()
        return False

    async def renew(self) -> bool:
        """Claim the next period; False when someone else holds this one or the next."""
        current = self._period()
        return await self._hold(current) and await self._hold(current + 1)

    async def release(self) -> None:
        """Drop the period keys still ours, so a waiting executor need not wait for expiry."""
        for name in sorted(self._mine):
            if await self._store.get(name) == self._token:
                await self._store.delete(name)
        self._mine.clear()

    async def hold(self, work: Awaitable[T]) -> T:
        """Await `work` while renewing; cancel it and raise LeaseLostError if the lease is lost."""
        task = asyncio.ensure_future(work)
        renewer = asyncio.create_task(self._renew_until_lost(task))
        try:
            return await task
        except asyncio.CancelledError:
            if renewer.done() and renewer.result():
                raise LeaseLostError(self._key) from None
            raise
        finally:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
            if not task.done():
                task.cancel()

    async def _renew_until_lost(self, task: asyncio.Future[T]) -> bool:
        while not task.done():
            await asyncio.sleep(self._period_s / 3)
            try:
                kept = await self.renew()
            except RolloutError as exc:  # a store hiccup is not a lost lease: try again next time
                log.warning("lease %s: renewal failed: %s", self._key, exc)
                continue
            if not kept:
                log.error("lease %s: lost to another executor; stopping the upgrade", self._key)
                task.cancel()
                return True
        return False

    def _period(self) -> int:
        return math.floor(self._clock() / self._period_s)

    async def _hold(self, period: int) -> bool:
        name = f"{self._key}:{period}"
        created = await self._store.put_if_absent(name, self._token, ttl_s=self._period_s * _TTL_PERIODS)
        if created or await self._store.get(name) == self._token:
            self._mine.add(name)
            return True
        return False
