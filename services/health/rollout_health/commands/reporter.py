"""`python -m rollout_health reporter`: probes the configured clusters and publishes heartbeats
until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import logging

from rollout_adapters.connections import kafka_bus
from rollout_adapters.shutdown import bounded_close, stop_on_signals, unless_stopped
from rollout_common.ports import Bus
from rollout_common.topics.catalog import HEARTBEATS, UPGRADE_RESULTS
from rollout_health.commands.lifecycle import serving, status_server, until_reachable
from rollout_health.metrics import HealthMetrics
from rollout_health.probes import build_probe
from rollout_health.probes.port import ReadinessProbe
from rollout_health.reporter import Reporter
from rollout_health.settings import ReporterSettings

log = logging.getLogger("rollout_health")


async def run_reporter(settings: ReporterSettings) -> None:
    stop = stop_on_signals()
    bus = kafka_bus(settings, client_id=f"rollout-health-{settings.reporter_id}")
    probe = build_probe(settings, bus=bus)
    metrics = HealthMetrics()
    reporters: list[Reporter] = []
    status = status_server(settings, metrics, ready=lambda: any(r.ready for r in reporters))
    try:
        async with serving(status):
            # Kafka may be down when the reporter starts (a broker restart, a fresh deployment):
            # wait for it like the other services instead of exiting.
            if not await until_reachable(lambda: _start(settings, bus=bus, probe=probe, stop=stop), stop):
                return
            reporter = _reporter(settings, bus=bus, probe=probe, metrics=metrics)
            reporters.append(reporter)
            log.info("reporter %s: %d cluster(s), %s probe", settings.reporter_id, len(settings.clusters), probe.name)
            await reporter.run(stop)
    finally:
        await bounded_close("the probe", probe.close())
        await bounded_close("the Kafka clients", bus.close())


async def _start(settings: ReporterSettings, *, bus: Bus, probe: ReadinessProbe, stop: asyncio.Event) -> None:
    if settings.create_topics:
        specs = [settings.topic_spec(t) for t in (HEARTBEATS, UPGRADE_RESULTS)]
        await unless_stopped(bus.ensure_topics(specs), stop)
    await unless_stopped(probe.start(), stop)


def _reporter(settings: ReporterSettings, *, bus: Bus, probe: ReadinessProbe, metrics: HealthMetrics) -> Reporter:
    return Reporter(
        bus=bus,
        probe=probe,
        clusters=settings.clusters,
        reporter_id=settings.reporter_id,
        topic_prefix=settings.topic_prefix,
        probe_interval_s=settings.probe_interval_s,
        heartbeat_interval_s=settings.heartbeat_interval_s,
        metrics=metrics,
    )
