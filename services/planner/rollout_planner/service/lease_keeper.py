"""The planner's lease on the store (BUS-8): take it or stand by, renew it, fence every write.

Keys (under the store's namespace): `planner/lease` holds the token `<epoch>/<owner>` with a TTL
of `lease_ttl_s`; `planner/lease-epoch` counts the epochs. A standby tries to take the lease
every `lease_retry_s`; the holder renews it at least every `lease_ttl_s / 3` (at each step of
its loop when due) and each of its writes is `Store.put_many_fenced` on its token: one atomic
step that writes nothing unless `planner/lease` still holds that token. A planner that finds
its lease gone stops deciding at once and raises `LeaseLostError`; `Planner.run` then drops its
state and consumer and stands by again.

Renewal runs in a task of its own (`start_renewing`), besides the check at each step: a step
can block far longer than the TTL (the first poll after a takeover waits for the Kafka group to
rebalance, which waits out the session of a member that died without leaving). A step can also
hold the event loop itself for longer than the TTL (loading or writing the state of a large
fleet on a loaded machine), so a planner given `renewal_store` renews from a thread of its own
as well, with its own store client: a live planner busy on a long step keeps its lease, instead
of losing it, reloading, and losing it again. The thread renews only while the loop has run
within `max_stall_s`, so a planner whose loop hangs still gives the lease up; and a paused
process pauses its threads too, so SIGSTOP still costs the lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
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
        renewal_store: Callable[[], Store] | None = None,
        max_stall_s: float = 120.0,
    ) -> None:
        self._store = store
        self._renewal_store = renewal_store
        self._max_stall_s = max_stall_s
        self._moving = threading.Lock()
        self._loop_ran_at = float("-inf")
        self._thread: _RenewalThread | None = None
        self._ttl_s = ttl_s
        self._retry_s = retry_s
        self.owner = owner or default_owner()
        self._now = monotonic
        self.leadership = Leadership()
        self._renewed_at = float("-inf")
        self._renewer: asyncio.Task[None] | None = None

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

    def start_renewing(self) -> None:
        self._loop_ran_at = self._now()
        if self._renewer is None:
            self._renewer = asyncio.create_task(self._renew_while_active(), name="planner-lease")
        if self._thread is None and self._renewal_store is not None:
            self._thread = _RenewalThread(self, self._renewal_store)
            self._thread.start()

    async def stop_renewing(self) -> None:
        renewer, self._renewer = self._renewer, None
        if renewer is not None:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
        thread, self._thread = self._thread, None
        if thread is not None:
            await asyncio.to_thread(thread.stop)

    async def _renew_while_active(self) -> None:
        while self.leadership.state is LeaseState.ACTIVE:
            self._loop_ran_at = self._now()
            await asyncio.sleep(self._ttl_s / 3)
            self._loop_ran_at = self._now()
            try:
                await self.keep()
            except LeaseLostError:
                return  # the planner's next check stops it
            except RolloutError as exc:
                log.warning("lease: renewal failed", extra={"error": str(exc)})

    async def keep(self) -> None:
        """Renew when a third of the TTL has passed; raise LeaseLostError when the lease is gone."""
        self._loop_ran_at = self._now()
        await self.renew_with(self._store)

    async def renew_with(self, store: Store) -> None:
        """`keep` through `store` (the loop's, or the renewal thread's own client)."""
        self.check()
        sent_at = self._now()
        if sent_at - self._renewed_at < self._ttl_s / 3:
            return
        token = self._token()
        try:
            kept = await store.renew_lease(LEASE_KEY, token, ttl_s=self._ttl_s)
        except TransientError as exc:
            # Not lost yet: the deadline decides. Until then the fenced writes keep us honest.
            log.warning("lease: renewal failed; retrying", extra={"error": str(exc)})
            self.check()
            return
        if not kept:
            self._lose(LeaseEvent.REFUSED, "the store holds another planner's lease")
        self._move(LeaseEvent.RENEWED, sent_at=sent_at)
        self._renewed_at = max(self._renewed_at, sent_at)

    def loop_stalled_for(self) -> float:
        """Seconds since the planner's event loop last ran the lease's code."""
        return self._now() - self._loop_ran_at

    @property
    def ttl_s(self) -> float:
        return self._ttl_s

    @property
    def max_stall_s(self) -> float:
        return self._max_stall_s

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
        await self.stop_renewing()
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
        with self._moving:
            lost_now = self.leadership.state is LeaseState.ACTIVE
            if lost_now:
                self._move_locked(event, sent_at=self._now(), reason=reason)
        if lost_now:
            log.error("lease lost: this planner stops deciding", extra={"reason": reason})
        raise LeaseLostError(f"lease lost ({reason}); this planner stopped deciding")

    def _move(self, event: LeaseEvent, *, sent_at: float, token: bytes | None = None, reason: str = "") -> None:
        # Two threads move the lease (the loop and the renewal thread): one move at a time, and a
        # renewal that lands after the other lost the lease changes nothing.
        with self._moving:
            if event is LeaseEvent.RENEWED and self.leadership.state is not LeaseState.ACTIVE:
                raise LeaseLostError(f"lease lost ({self.leadership.reason}); this planner stopped deciding")
            self._move_locked(event, sent_at=sent_at, token=token, reason=reason)

    def _move_locked(self, event: LeaseEvent, *, sent_at: float, token: bytes | None = None, reason: str = "") -> None:
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


class _RenewalThread:
    """Renews `lease` every third of its TTL from a thread with its own event loop and store
    client, while the planner's loop has run within `lease.max_stall_s`."""

    def __init__(self, lease: PlannerLease, make_store: Callable[[], Store]) -> None:
        self._lease = lease
        self._make_store = make_store
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="planner-lease-renewal", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join()

    def _run(self) -> None:
        asyncio.run(self._renew())

    async def _renew(self) -> None:
        store = self._make_store()
        warned = False
        try:
            # Blocking on the event is fine here: this loop serves nothing else.
            while not self._stopping.wait(self._lease.ttl_s / 3):
                if self._lease.state is not LeaseState.ACTIVE:
                    return
                stalled = self._lease.loop_stalled_for()
                if stalled > self._lease.max_stall_s:
                    if not warned:
                        log.error(
                            "lease: the planner's loop has not run for %.0f s; the lease is left to expire",
                            stalled,
                            extra={"max_stall_s": self._lease.max_stall_s},
                        )
                        warned = True
                    continue
                try:
                    await self._lease.renew_with(store)
                except LeaseLostError:
                    return
                except RolloutError as exc:
                    log.warning("lease: renewal from the renewal thread failed", extra={"error": str(exc)})
        finally:
            with contextlib.suppress(RolloutError):
                await store.close()


__all__ = ["EPOCH_KEY", "LEASE_KEY", "PlannerLease", "default_owner"]
