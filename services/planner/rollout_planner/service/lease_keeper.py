"""The planner's lease on the store (BUS-8): take it or stand by, renew it, fence every write.

Keys (under the store's namespace): `planner/lease` holds the token `<epoch>/<owner>` with a TTL
of `lease_ttl_s`; `planner/lease-epoch` counts the epochs. A standby tries to take the lease
every `lease_retry_s`; the holder renews it at least every `lease_ttl_s / 3` (at each step of
its loop when due) and each of its writes is `Store.put_many_fenced` on its token: one atomic
step that writes nothing unless `planner/lease` still holds that token. A planner that finds
its lease gone stops deciding at once and raises `LeaseLostError` (the process exits with code
3; restarted, it comes back as a standby).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping, Sequence

from rollout_common.errors import RolloutError, TransientError
from rollout_common.ports import Store
from rollout_planner.service.leadership import Leadership, LeaseEvent, LeaseLostError, LeaseState, transition

log = logging.getLogger("rollout.planner")

LEASE_KEY = "planner/lease"
EPOCH_KEY = "planner/lease-epoch"
# The local deadline trusts a little less than the TTL: the store's clock may run faster.
_TRUST = 0.9

Monotonic = Callable[[], float]


def default_owner() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class PlannerLease:
    def __init__(
        self,
        store: Store,
        *,
        ttl_s: float,
        retry_s: float,
        owner: str | None = None,
        monotonic: Monotonic = time.monotonic,
    ) -> None:
        self._store = store
        self._ttl_s = ttl_s
        self._retry_s = retry_s
        self.owner = owner or default_owner()
        self._now = monotonic
        self.leadership = Leadership()
        self._renewed_at = float("-inf")

    @property
    def state(self) -> LeaseState:
        return self.leadership.state

    async def wait_until_held(self, stopping: asyncio.Event) -> bool:
        """Stand by until this planner takes the lease (True), or until asked to stop (False)."""
        announced = False
        while not stopping.is_set():
            sent_at = self._now()
            try:
                token = await self._store.take_lease(
                    LEASE_KEY, epoch_key=EPOCH_KEY, owner=self.owner, ttl_s=self._ttl_s
                )
            except TransientError as exc:
                log.warning("lease: the store is unreachable; standing by", extra={"error": str(exc)})
                token = None
            if token is not None:
                self._move(LeaseEvent.TAKEN, sent_at=sent_at, token=token, reason="taken")
                self._renewed_at = sent_at
                log.info("lease taken: this planner is active", extra={"epoch": self.leadership.epoch})
                return True
            if not announced:
                holder = await self._holder()
                log.info("standby: another planner holds the lease", extra={"holder": holder})
                announced = True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), self._retry_s)
        return False

    async def keep(self) -> None:
        """Renew when a third of the TTL has passed; raise LeaseLostError when the lease is gone."""
        self.check()
        sent_at = self._now()
        if sent_at - self._renewed_at < self._ttl_s / 3:
            return
        token = self._token()
        try:
            kept = await self._store.renew_lease(LEASE_KEY, token, ttl_s=self._ttl_s)
        except TransientError as exc:
            # Not lost yet: the deadline decides. Until then the fenced writes keep us honest.
            log.warning("lease: renewal failed; retrying", extra={"error": str(exc)})
            self.check()
            return
        if not kept:
            self._lose(LeaseEvent.REFUSED, "the store holds another planner's lease")
        self._move(LeaseEvent.RENEWED, sent_at=sent_at)
        self._renewed_at = sent_at

    def check(self) -> None:
        """Raise LeaseLostError unless this planner may still decide and write."""
        if self.leadership.may_act(self._now()):
            return
        if self.leadership.state is LeaseState.ACTIVE:
            self._lose(LeaseEvent.EXPIRED, f"not renewed within {self._ttl_s * _TRUST:g} s")
        raise LeaseLostError(f"lease lost ({self.leadership.reason}); this planner stopped deciding")

    async def put_many(self, items: Mapping[str, bytes], *, delete: Sequence[str] = ()) -> None:
        """Write only while holding the lease; a refused write means another planner is active."""
        self.check()
        if not await self._store.put_many_fenced(items, fence_key=LEASE_KEY, token=self._token(), delete=delete):
            self._lose(LeaseEvent.REFUSED, "a write was refused: another planner holds the lease")

    async def release(self) -> None:
        """Let go on a clean stop, so a standby takes over at once rather than after the TTL."""
        if self.leadership.state is not LeaseState.ACTIVE:
            return
        token = self._token()
        self._move(LeaseEvent.RELEASED, sent_at=self._now(), reason="released on stop")
        try:
            await self._store.delete_if_equal(LEASE_KEY, token)
        except RolloutError as exc:  # it expires by itself; a standby only waits longer
            log.warning("lease: release failed", extra={"error": str(exc)})
        log.info("lease released")

    def _lose(self, event: LeaseEvent, reason: str) -> None:
        if self.leadership.state is LeaseState.ACTIVE:
            self._move(event, sent_at=self._now(), reason=reason)
            log.error("lease lost: this planner stops deciding", extra={"reason": reason})
        raise LeaseLostError(f"lease lost ({reason}); this planner stopped deciding")

    def _move(self, event: LeaseEvent, *, sent_at: float, token: bytes | None = None, reason: str = "") -> None:
        self.leadership = transition(
            self.leadership, event, sent_at=sent_at, ttl_s=self._ttl_s * _TRUST, token=token, reason=reason
        )

    def _token(self) -> bytes:
        token = self.leadership.token
        if token is None:
            raise LeaseLostError("the lease was never taken")
        return token

    async def _holder(self) -> str | None:
        try:
            raw = await self._store.get(LEASE_KEY)
        except RolloutError:
            return None
        return raw.decode(errors="replace") if raw is not None else None


__all__ = ["EPOCH_KEY", "LEASE_KEY", "PlannerLease", "default_owner"]
