"""One bridge replica: wait for the Lease, then bridge until stopped or the Lease is lost."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from enum import Enum

from rollout_adapters.connections import kafka_bus
from rollout_adapters.kube.client import async_client
from rollout_adapters.kube_bridge.bridge import FIELD_MANAGER, Bridge
from rollout_adapters.kube_bridge.lease import LeaderLease
from rollout_adapters.kube_bridge.settings import BridgeSettings

log = logging.getLogger(__name__)


class Role(str, Enum):
    STARTING = "starting"
    STANDBY = "standby"
    LEADING = "leading"
    STOPPED = "stopped"


class Replica:
    """`role` says what it is doing; `bridge` is set while it leads (tests read both)."""

    def __init__(self, settings: BridgeSettings) -> None:
        self.settings = settings
        self.role = Role.STARTING
        self.bridge: Bridge | None = None
        self.leading = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> bool:
        """Run until `stop`; False when it stopped because it lost the Lease (the caller exits
        non-zero, and a restarted replica stands by)."""
        settings = self.settings
        client = async_client(
            kubeconfig=settings.kubeconfig, field_manager=FIELD_MANAGER, context=settings.kube_context
        )
        lease = LeaderLease(
            client,
            name=settings.lease_name,
            namespace=settings.namespace,
            identity=settings.identity,
            duration_s=settings.lease_duration_s,
            renew_s=settings.lease_renew_s,
        )
        try:
            self.role = Role.STANDBY
            if not await lease.acquire(stop):
                return True
            return await self._lead(lease, client=client, stop=stop)
        finally:
            self.role = Role.STOPPED
            await client.close()

    async def _lead(self, lease: LeaderLease, *, client: object, stop: asyncio.Event) -> bool:
        bus = kafka_bus(self.settings, client_id=f"rollout-kube-bridge-{self.settings.identity}")
        self.bridge = Bridge(client=client, bus=bus, settings=self.settings)  # type: ignore[arg-type]
        self.role = Role.LEADING
        self.leading.set()
        work = asyncio.create_task(self.bridge.run(stop), name="bridge")
        keeper = asyncio.create_task(lease.keep(stop), name="lease")
        try:
            done, _ = await asyncio.wait([work, keeper], return_when=asyncio.FIRST_COMPLETED)
            if work in done:
                work.result()  # a permanent error ends the replica
            return stop.is_set()
        finally:
            for task in (work, keeper):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            await bus.close()
            if stop.is_set():
                await lease.release()
