"""A renewable lease on one upgrade target, with a fencing token.

`executor:lease:<target>` holds `<epoch>/<holder>` for `lease_s` seconds (`Store.take_lease`),
`executor:lease-epoch:<target>` counts the epochs. The holder renews every third of the lease
(`Store.renew_lease`, only while the key still holds its token) and lets go with an atomic
compare-and-delete, so it can never delete a lease another executor has taken since. A dead
holder's target is taken over by the next executor within `lease_s` (plus its wait poll).

The epoch is the lease's fencing token: it only grows, so a driver, or the system it calls, can
refuse an order carrying a smaller token than one it has already seen (a stale holder that was
paused or cut off while another took over). The driver gets it as `ROLLOUT_FENCING_TOKEN`.

The holder stops its driver as soon as the lease is lost: a renewal refused (another holder),
or no renewal succeeded for `lease_s` (the store unreachable: by then the key has expired and
another executor may hold it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from rollout_common.errors import RolloutError
from rollout_common.ports import Store, token_epoch

log = logging.getLogger(__name__)

T = TypeVar("T")
Clock = Callable[[], float]


class LeaseLostError(Exception):
    """Another executor may hold the target now; the work done under the lease was stopped."""


class Lease:
    def __init__(
        self, store: Store, *, key: str, holder: str, lease_s: float, monotonic: Clock = time.monotonic
    ) -> None:
        self._store = store
        self._key = key
        self._epoch_key = key.replace("executor:lease:", "executor:lease-epoch:", 1)
        self._holder = holder
        self._lease_s = lease_s
        self._now = monotonic
        self._token: bytes | None = None
        self._renewed_at = float("-inf")

    @property
    def key(self) -> str:
        return self._key

    @property
    def token(self) -> bytes | None:
        return self._token

    @property
    def fencing_token(self) -> int:
        """The epoch of this lease: larger than any earlier holder's of the same target."""
        if self._token is None:
            raise LeaseLostError(self._key)
        return token_epoch(self._token)

    async def acquire(self) -> bool:
        """True when this lease now holds the target (or held it already)."""
        if self._token is not None:
            return True
        sent_at = self._now()
        self._token = await self._store.take_lease(
            self._key, epoch_key=self._epoch_key, owner=self._holder, ttl_s=self._lease_s
        )
        if self._token is None:
            return False
        self._renewed_at = sent_at
        return True

    async def renew(self) -> bool:
        """Extend the lease; False when another executor holds it now."""
        if self._token is None:
            return False
        sent_at = self._now()
        if not await self._store.renew_lease(self._key, self._token, ttl_s=self._lease_s):
            return False
        self._renewed_at = sent_at
        return True

    def expired(self) -> bool:
        """True once `lease_s` passed since the last take or renewal was sent: the key is gone."""
        return self._now() - self._renewed_at >= self._lease_s

    async def release(self) -> None:
        """Compare-and-delete: drops the lease only while it is still ours."""
        token, self._token = self._token, None
        if token is not None:
            await self._store.delete_if_equal(self._key, token)

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
            await asyncio.sleep(self._lease_s / 3)
            try:
                kept = await self.renew()
            except RolloutError as exc:
                # A store hiccup is not a lost lease, until the lease has run out without renewal.
                if not self.expired():
                    log.warning("lease %s: renewal failed: %s", self._key, exc)
                    continue
                log.error("lease %s: not renewed for %s s; stopping the upgrade", self._key, self._lease_s)
                kept = False
            if not kept:
                log.error("lease %s: lost; stopping the upgrade", self._key)
                self._token = None
                task.cancel()
                return True
        return False
