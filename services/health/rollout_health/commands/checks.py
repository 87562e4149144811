"""`python -m rollout_health checks`: evaluates the metric checks of the series the planner
announces against Prometheus and publishes each result to rollout.check-results (CHK-2, see
`rollout_health.checks.runner`); one per fleet."""

from __future__ import annotations

import asyncio
import logging

from rollout_adapters.connections import kafka_bus, redis_store
from rollout_adapters.shutdown import bounded_close, stop_on_signals, unless_stopped
from rollout_common.ports import Bus
from rollout_common.topics.catalog import CHECK_RESULTS, PROGRESS
from rollout_health.checks.prometheus import PrometheusQuery
from rollout_health.checks.runner import CheckRunner
from rollout_health.commands.lifecycle import serving, status_server, until_reachable
from rollout_health.metrics import HealthMetrics
from rollout_health.settings import CheckRunnerSettings

log = logging.getLogger("rollout_health")


async def run_checks(settings: CheckRunnerSettings) -> None:
    stop = stop_on_signals()
    bus = kafka_bus(settings, client_id="rollout-health-checks")
    store = redis_store(settings)
    query = PrometheusQuery(settings.checks)
    metrics = HealthMetrics()
    runners: list[CheckRunner] = []
    status = status_server(settings, metrics, ready=lambda: any(r.ready for r in runners))
    try:
        async with serving(status):
            await query.start()
            if not await until_reachable(lambda: _create_topics(settings, bus, stop), stop):
                return
            runner = CheckRunner(bus=bus, store=store, query=query, settings=settings, metrics=metrics)
            runners.append(runner)
            log.info("check runner: default Prometheus %s", settings.checks.prometheus_url)
            await runner.run(stop)
    finally:
        await bounded_close("the Prometheus client", query.close())
        await bounded_close("the Redis client", store.close())
        await bounded_close("the Kafka clients", bus.close())


async def _create_topics(settings: CheckRunnerSettings, bus: Bus, stop: asyncio.Event) -> None:
    if settings.create_topics:
        specs = [settings.topic_spec(t) for t in (PROGRESS, CHECK_RESULTS)]
        await unless_stopped(bus.ensure_topics(specs), stop)
