"""The composition root: real adapters from the settings, the probe server, signals, shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from rollout_adapters.connections import kafka_bus, redis_store
from rollout_adapters.kafka_bus import ConsumerOptions
from rollout_adapters.shutdown import bounded_close, stop_on_signals, unless_stopped
from rollout_adapters.status_server import StatusServer
from rollout_common.connection_settings import loggable
from rollout_common.errors import TransientError
from rollout_common.ports import Bus, Store
from rollout_planner.engine import EngineState
from rollout_planner.service import initial_state
from rollout_planner.service.checkpoint import CLOCK_ORIGIN_KEY
from rollout_planner.service.clock import ScaledClock
from rollout_planner.service.dashboard_feed import dashboard_site
from rollout_planner.service.planner import InitialState, Planner
from rollout_planner.service.settings import PlannerSettings

log = logging.getLogger("rollout.planner")


async def stored_clock(store: Store, *, scale: float) -> ScaledClock:
    """The scaled clock whose origin is the first start of this planner (kept in the store).

    A planner started while Redis restarts (a standby beside a running one, say) waits for it, as
    every later store call does, instead of exiting.
    """
    delay_s = 0.2
    while True:
        try:
            await store.put_if_absent(CLOCK_ORIGIN_KEY, repr(time.time()).encode())
            raw = await store.get(CLOCK_ORIGIN_KEY)
            break
        except TransientError as exc:
            log.warning("the store is unreachable at start; retrying", extra={"error": str(exc), "in_s": delay_s})
            await asyncio.sleep(delay_s)
            delay_s = min(delay_s * 2, 5.0)
    origin = float(raw) if raw is not None else time.time()
    return ScaledClock(origin=origin, scale=scale)


def initial_state_source(settings: PlannerSettings, store: Store) -> InitialState:
    path = settings.scenario_file
    if path is not None:

        async def from_file() -> EngineState | None:
            return initial_state.from_file(path)

        return from_file
    return lambda: initial_state.from_store(store)


def consumer_options(settings: PlannerSettings) -> ConsumerOptions:
    """How the planner's consumer joins its group and waits on the broker."""
    return ConsumerOptions(
        group_instance_id=settings.group_instance_id, fetch_max_wait_ms=settings.kafka_fetch_max_wait_ms
    )


async def serve(settings: PlannerSettings) -> None:
    """Run the planner until SIGTERM or SIGINT, then stop cleanly."""
    log.info("planner starting", extra={"settings": loggable(settings)})
    bus = kafka_bus(settings, client_id=settings.source, consumer_options=consumer_options(settings))
    store = redis_store(settings)
    probes: StatusServer | None = None
    try:
        planner = await _planner(settings, bus=bus, store=store)
        signalled = stop_on_signals()
        task = asyncio.create_task(planner.run(), name="planner")
        if settings.http_port:
            probes = _probes(settings, planner, task)
            port = await probes.start()
            log.info("probes listening", extra={"port": port, "dashboard_port": probes.dashboard_port})
        await _until_done_or_stopped(task, signalled, planner=planner, grace_s=settings.shutdown_grace_s)
    finally:
        if probes is not None:
            await probes.stop()
        await bounded_close("the Kafka clients", bus.close())
        await bounded_close("the Redis client", store.close())


async def _planner(settings: PlannerSettings, *, bus: Bus, store: Store) -> Planner:
    clock = await stored_clock(store, scale=settings.time_scale)
    return Planner(
        bus=bus,
        store=store,
        settings=settings,
        clock=clock,
        initial_state=initial_state_source(settings, store),
        lease_store=lambda: redis_store(settings),
    )


def _probes(settings: PlannerSettings, planner: Planner, task: asyncio.Task[None]) -> StatusServer:
    """Liveness (the planner's task runs), readiness, metrics and the dashboard, on the HTTP port."""
    return StatusServer(
        host=settings.http_host,
        port=settings.http_port,
        healthy=lambda: not task.done(),
        ready=lambda: planner.ready,
        metrics=planner.metrics.exposition,
        dashboard=dashboard_site(settings, planner),
    )


async def _until_done_or_stopped(
    task: asyncio.Task[None], signalled: asyncio.Event, *, planner: Planner, grace_s: float
) -> None:
    """Wait for the planner; after a signal, give it `grace_s` to stop cleanly, then cancel it.

    Cancelling is safe: every store write is atomic and every message is published again from
    the outbox after a restart; it only costs the stop snapshot."""
    await unless_stopped(asyncio.shield(task), signalled)
    if not task.done():
        planner.stop()
        await asyncio.wait({task}, timeout=grace_s)
    if not task.done():
        log.warning("the planner did not stop within the grace period; cancelled", extra={"grace_s": grace_s})
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    if task.cancelled():  # cancelled after the grace period: a clean stop, not an error
        return
    error = task.exception()
    if isinstance(error, TransientError) and signalled.is_set():
        # Asked to stop, the planner gives up a store write or a publish it would otherwise retry:
        # as safe as being cancelled (the journal and the outbox redo it after a restart).
        log.warning("stopped with a write not done; it is redone after a restart", extra={"error": str(error)})
        return
    task.result()
