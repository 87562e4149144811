"""What every command does around its work: it stops on SIGTERM/SIGINT, serves its metrics and
probes when a port is set, and waits for Kafka rather than exiting while it is not reachable."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from rollout_adapters.status_server import StatusServer
from rollout_common.errors import TransientError
from rollout_health.metrics import HealthMetrics
from rollout_health.settings import CheckRunnerSettings, InventorySettings, MonitorSettings, ReporterSettings

log = logging.getLogger("rollout_health")

# The settings of any of the commands.
CommandSettings = ReporterSettings | InventorySettings | MonitorSettings | CheckRunnerSettings


def status_server(
    settings: CommandSettings,
    metrics: HealthMetrics,
    *,
    ready: Callable[[], bool],
    healthy: Callable[[], bool] = lambda: True,
) -> StatusServer | None:
    if not settings.metrics_port:
        return None
    return StatusServer(
        host=settings.metrics_host, port=settings.metrics_port, registry=metrics.registry, ready=ready, healthy=healthy
    )


@contextlib.asynccontextmanager
async def serving(status: StatusServer | None) -> AsyncIterator[None]:
    """`status` serving for the block, when there is one."""
    try:
        if status is not None:
            await status.start()
        yield
    finally:
        if status is not None:
            await status.stop()


async def until_reachable(start: Callable[[], Awaitable[None]], stop: asyncio.Event) -> bool:
    """`start` retried every 2 s while Kafka is not reachable (a service waits for it rather than
    exiting); False when asked to stop first."""
    while not stop.is_set():
        try:
            await start()
            return not stop.is_set()
        except TransientError as exc:
            log.warning("Kafka not reachable yet; retrying in 2 s: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 2.0)
    return False
