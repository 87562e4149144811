"""Leader election through a coordination.k8s.io Lease, so two bridge replicas are safe.

The holder renews `spec.renewTime` every `renew_s`; another replica takes the lease only once
`renewTime + leaseDurationSeconds` has passed. Every write carries the resourceVersion read, so of
two replicas racing for an expired lease the apiserver lets one win (409 for the other). A holder
that fails to renew within the duration stops leading; one that stops cleanly gives the lease up
(empty holder) so the standby takes over at its next try instead of after the duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging

import httpx2 as httpx
from lightkube import ApiError, AsyncClient
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

log = logging.getLogger(__name__)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class LeaderLease:
    def __init__(
        self,
        client: AsyncClient,
        *,
        name: str,
        namespace: str,
        identity: str,
        duration_s: int = 15,
        renew_s: float = 5.0,
    ) -> None:
        self._client = client
        self._name = name
        self._namespace = namespace
        self.identity = identity
        self._duration_s = duration_s
        self._renew_s = renew_s
        self._renewed_at: dt.datetime | None = None

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Wait until this replica holds the lease (True), or `stop` is set (False)."""
        while not stop.is_set():
            if await self._try():
                log.info("leading: lease %s/%s held by %s", self._namespace, self._name, self.identity)
                return True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self._renew_s)
        return False

    async def keep(self, stop: asyncio.Event) -> None:
        """Renew until `stop` is set; returns (lost) when a renewal did not succeed within the duration."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self._renew_s)
            if stop.is_set():
                return
            if await self._try():
                continue
            held_for = (_now() - self._renewed_at).total_seconds() if self._renewed_at else float("inf")
            if held_for >= self._duration_s:
                log.error("lost the lease %s/%s: not renewed for %.0f s", self._namespace, self._name, held_for)
                return

    async def release(self) -> None:
        """Give the lease up if this replica holds it, so a standby takes over without waiting."""
        try:
            lease = await self._client.get(Lease, self._name, namespace=self._namespace)
            if lease.spec is not None and lease.spec.holderIdentity == self.identity:
                lease.spec.holderIdentity = None
                lease.spec.renewTime = None
                await self._client.replace(lease)
                log.info("gave up the lease %s/%s", self._namespace, self._name)
        except (ApiError, httpx.HTTPError, OSError) as exc:
            log.warning("could not give up the lease (it expires on its own): %s", exc)

    async def _try(self) -> bool:
        """One attempt to take or renew the lease."""
        now = _now()
        try:
            return await self._take_or_renew(now)
        except ApiError as exc:
            if exc.status.code != 409:
                log.warning("lease %s/%s: %s", self._namespace, self._name, exc.status.message)
            return False
        except (httpx.HTTPError, OSError) as exc:
            log.warning("lease %s/%s: apiserver unreachable: %s", self._namespace, self._name, exc)
            return False

    async def _take_or_renew(self, now: dt.datetime) -> bool:
        """True when this replica holds the lease now; False when another one holds it unexpired."""
        try:
            lease = await self._client.get(Lease, self._name, namespace=self._namespace)
        except ApiError as exc:
            if exc.status.code != 404:
                raise
            await self._client.create(
                Lease(metadata=ObjectMeta(name=self._name, namespace=self._namespace), spec=self._spec(now, now))
            )
            self._renewed_at = now
            return True
        spec = lease.spec or LeaseSpec()
        mine = spec.holderIdentity == self.identity
        if not (mine or self._expired(spec, now)):
            return False
        acquired = spec.acquireTime if mine and spec.acquireTime else now
        lease.spec = self._spec(acquired, now, transitions=(spec.leaseTransitions or 0) + (0 if mine else 1))
        await self._client.replace(lease)  # carries the resourceVersion read: a racing writer gets 409
        self._renewed_at = now
        return True

    def _expired(self, spec: LeaseSpec, now: dt.datetime) -> bool:
        """Nobody holds it, or its holder did not renew it within its duration."""
        return (
            not spec.holderIdentity
            or spec.renewTime is None
            or (now - spec.renewTime).total_seconds() >= (spec.leaseDurationSeconds or self._duration_s)
        )

    def _spec(self, acquired: dt.datetime, renewed: dt.datetime, *, transitions: int = 0) -> LeaseSpec:
        return LeaseSpec(
            holderIdentity=self.identity,
            leaseDurationSeconds=self._duration_s,
            acquireTime=acquired,
            renewTime=renewed,
            leaseTransitions=transitions,
        )
