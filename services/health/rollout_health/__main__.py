"""`python -m rollout_health reporter|inventory|monitor|checks [--config FILE]`.

- `reporter`: probes the configured clusters and publishes heartbeats until SIGTERM/SIGINT.
- `inventory`: lists and watches the cluster objects of a management cluster (Cluster API or
  Fleet) and publishes their changes to rollout.inventory (see `rollout_health.inventory`).
- `monitor`: supervises the faust monitor worker (restarts it with back-off), which turns
  heartbeats into readiness changes. `monitor-worker` is that worker itself, unsupervised.
- `checks`: evaluates the metric checks of the series the planner announces against Prometheus
  and publishes each result to rollout.check-results (CHK-2, see `rollout_health.checks.runner`);
  one per fleet.

Two processes rather than one: the reporter runs near the clusters it probes (one or many),
the monitor once per fleet (or a few, sharing the work through the consumer group).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import faust

from rollout_adapters.connections import kafka_bus, redis_store
from rollout_adapters.shutdown import bounded_close, unless_stopped
from rollout_adapters.status_server import StatusServer
from rollout_common import json_logging
from rollout_common.connection_settings import load, loggable
from rollout_common.errors import RolloutError, TransientError
from rollout_common.topics.catalog import CHECK_RESULTS, HEARTBEATS, INVENTORY, PROGRESS, UPGRADE_RESULTS
from rollout_health.metrics import HealthMetrics
from rollout_health.monitor import HealthMonitor
from rollout_health.probes import build_probe
from rollout_health.reporter import Reporter
from rollout_health.settings import CheckRunnerSettings, InventorySettings, MonitorSettings, ReporterSettings
from rollout_health.supervisor import supervise

log = logging.getLogger("rollout_health")


async def run_reporter(settings: ReporterSettings) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    bus = kafka_bus(settings, client_id=f"rollout-health-{settings.reporter_id}")
    probe = build_probe(settings, bus=bus)
    metrics = HealthMetrics()
    reporters: list[Reporter] = []
    status = _status_server(settings, metrics, ready=lambda: any(r.ready for r in reporters))
    try:
        if status is not None:
            await status.start()

        # Kafka may be down when the reporter starts (a broker restart, a fresh deployment):
        # wait for it like the other services instead of exiting.
        async def start() -> None:
            if settings.create_topics:
                specs = [settings.topic_spec(t) for t in (HEARTBEATS, UPGRADE_RESULTS)]
                await unless_stopped(bus.ensure_topics(specs), stop)
            await unless_stopped(probe.start(), stop)

        if not await _until_reachable(start, stop):
            return
        reporter = Reporter(
            bus=bus,
            probe=probe,
            clusters=settings.clusters,
            reporter_id=settings.reporter_id,
            topic_prefix=settings.topic_prefix,
            probe_interval_s=settings.probe_interval_s,
            heartbeat_interval_s=settings.heartbeat_interval_s,
            metrics=metrics,
        )
        reporters.append(reporter)
        log.info("reporter %s: %d cluster(s), %s probe", settings.reporter_id, len(settings.clusters), probe.name)
        await reporter.run(stop)
    finally:
        if status is not None:
            await status.stop()
        await bounded_close("the probe", probe.close())
        await bounded_close("the Kafka clients", bus.close())


async def run_inventory(settings: InventorySettings) -> None:
    """In the health service because it already observes the fleet's clusters from outside them:
    one more reader of the management cluster, deployed next to the reporters, with its own
    (read-only) role. One instance per management cluster; it keeps no lease, so run one."""
    # Imported here: the reporter and monitor need no Kubernetes client.
    from rollout_adapters.kube.client import async_client
    from rollout_health.inventory.checkpoint import Checkpoint
    from rollout_health.inventory.watcher import ClusterKind, InventoryWatcher

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    bus = kafka_bus(settings, client_id="rollout-inventory-watcher")
    client = async_client(
        kubeconfig=settings.kubeconfig, context=settings.kube_context, field_manager="rollout-inventory"
    )
    watchers: list[InventoryWatcher] = []
    # Ready once every watch has listed: the inventory it publishes is complete from then on.
    status = _status_server(settings, HealthMetrics(), ready=lambda: any(w.synced.is_set() for w in watchers))
    try:
        if status is not None:
            await status.start()
        while not stop.is_set():
            try:
                if settings.create_topics:
                    await bus.ensure_topics([settings.topic_spec(INVENTORY)])
                break
            except TransientError as exc:
                log.warning("Kafka not reachable yet; retrying in 2 s: %s", exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 2.0)
        watcher = InventoryWatcher(
            client=client,
            bus=bus,
            topic_prefix=settings.topic_prefix,
            kind=ClusterKind(settings.cluster_kind),
            namespace=settings.namespace,
            watch_groups=settings.fleet_groups,
            watch_control_planes=settings.kubeadm_control_planes,
            checkpoint=Checkpoint(settings.checkpoint_file) if settings.checkpoint_file else None,
            watch_timeout_s=settings.watch_timeout_s,
        )
        watchers.append(watcher)
        log.info("inventory watcher: %s clusters in %s", settings.cluster_kind, settings.namespace or "all namespaces")
        await watcher.run(stop)
    finally:
        if status is not None:
            await status.stop()
        await client.close()
        await bus.close()


async def run_checks(settings: CheckRunnerSettings) -> None:
    # Imported here: the reporter and monitor need no Prometheus client.
    from rollout_health.checks.prometheus import PrometheusQuery
    from rollout_health.checks.runner import CheckRunner

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    bus = kafka_bus(settings, client_id="rollout-health-checks")
    store = redis_store(settings)
    query = PrometheusQuery(settings.checks)
    metrics = HealthMetrics()
    runners: list[CheckRunner] = []
    status = _status_server(settings, metrics, ready=lambda: any(r.ready for r in runners))
    try:
        if status is not None:
            await status.start()
        await query.start()

        async def start() -> None:
            if settings.create_topics:
                specs = [settings.topic_spec(t) for t in (PROGRESS, CHECK_RESULTS)]
                await unless_stopped(bus.ensure_topics(specs), stop)

        if not await _until_reachable(start, stop):
            return
        runner = CheckRunner(bus=bus, store=store, query=query, settings=settings, metrics=metrics)
        runners.append(runner)
        log.info("check runner: default Prometheus %s", settings.checks.prometheus_url)
        await runner.run(stop)
    finally:
        if status is not None:
            await status.stop()
        await bounded_close("the Prometheus client", query.close())
        await bounded_close("the Redis client", store.close())
        await bounded_close("the Kafka clients", bus.close())


async def _until_reachable(start: Callable[[], Awaitable[None]], stop: asyncio.Event) -> bool:
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


def _status_server(
    settings: ReporterSettings | InventorySettings | MonitorSettings | CheckRunnerSettings,
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


def run_monitor_worker(settings: MonitorSettings) -> None:
    monitor = HealthMonitor(settings)
    status = _status_server(settings, monitor.metrics, ready=lambda: monitor.ready, healthy=lambda: monitor.healthy)
    if status is not None:
        # In the worker, where the metrics are counted; it goes down (and /healthz with it)
        # while the supervisor restarts a crashed worker.
        server = status

        async def serve_status() -> None:
            await server.start()
            try:
                await asyncio.Event().wait()  # until the worker stops, cancelling its tasks
            finally:
                await server.stop()

        monitor.app.task(serve_status)

    worker = faust.Worker(
        monitor.app,
        loglevel=settings.log_level,
        logging_config=json_logging.dict_config(settings.log_level),
        redirect_stdouts=False,
    )
    # A service has no terminal to spin on, and at WARNING or above faust's spinner sets the root
    # logger to DEBUG so it sees every record: every library's debug call then builds a record that
    # no handler prints (a fifth of a worker's CPU per heartbeat at WARNING).
    worker.spinner = None
    worker.execute_from_commandline()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rollout_health", description=__doc__)
    parser.add_argument("command", choices=["reporter", "inventory", "monitor", "monitor-worker", "checks"])
    parser.add_argument("--config", type=Path, help="YAML file of settings (ROLLOUT_* variables win)")
    args = parser.parse_args(argv)
    try:
        settings: ReporterSettings | InventorySettings | MonitorSettings | CheckRunnerSettings
        if args.command == "reporter":
            settings = load(ReporterSettings, args.config, what="reporter settings")
        elif args.command == "inventory":
            settings = load(InventorySettings, args.config, what="inventory settings")
        elif args.command == "checks":
            settings = load(CheckRunnerSettings, args.config, what="check runner settings")
        else:
            settings = load(MonitorSettings, args.config, what="monitor settings")
    except RolloutError as exc:
        print(f"rollout_health: bad settings: {exc}", file=sys.stderr)
        return 2
    json_logging.configure(settings.log_level, quiet_libraries=False)
    log.info("%s starting", args.command, extra={"settings": loggable(settings)})
    try:
        if isinstance(settings, ReporterSettings):
            asyncio.run(run_reporter(settings))
            return 0
        if isinstance(settings, InventorySettings):
            asyncio.run(run_inventory(settings))
            return 0
        if isinstance(settings, CheckRunnerSettings):
            asyncio.run(run_checks(settings))
            return 0
        if args.command == "monitor":
            worker_argv = ["monitor-worker"] + (["--config", str(args.config)] if args.config else [])
            return asyncio.run(supervise(settings, worker_argv))
        run_monitor_worker(settings)
    except RolloutError as exc:
        log.error("%s stopped on an error: %s", args.command, exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
