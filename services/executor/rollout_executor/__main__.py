"""`python -m rollout_executor [--config FILE]`: run one executor until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from rollout_adapters.connections import kafka_bus, redis_store
from rollout_adapters.kafka_bus import ConsumerOptions, KafkaBus
from rollout_adapters.redis_store import RedisStore
from rollout_adapters.shutdown import bounded_close, stop_on_signals
from rollout_adapters.status_server import StatusServer
from rollout_common import json_logging
from rollout_common.connection_settings import loggable
from rollout_common.errors import RolloutError
from rollout_executor.drivers import build_driver
from rollout_executor.executor import Executor
from rollout_executor.ledger import UpgradeLedger
from rollout_executor.metrics import ExecutorMetrics
from rollout_executor.service import ExecutorService
from rollout_executor.settings import ExecutorSettings, load_settings, poll_interval_s

log = logging.getLogger("rollout_executor")


async def run(settings: ExecutorSettings) -> None:
    stop = stop_on_signals()
    options = ConsumerOptions(
        session_timeout_ms=int(settings.session_timeout_s * 1000),
        max_poll_interval_ms=int(poll_interval_s(settings) * 1000),
    )
    bus = kafka_bus(settings, client_id=f"rollout-executor-{settings.executor_id}", consumer_options=options)
    store = redis_store(settings)
    metrics = ExecutorMetrics()
    service = ExecutorService(settings, bus=bus, executor=_executor(settings, bus=bus, store=store, metrics=metrics))
    status = await _status_server(settings, service=service, metrics=metrics)
    log.info(
        "executor %s starting",
        settings.executor_id,
        extra={"settings": loggable(settings)},
    )
    try:
        await service.run(stop)
    finally:
        if status is not None:
            await status.stop()
        await bounded_close("the Kafka clients", bus.close())
        await bounded_close("the Redis client", store.close())
        log.info("executor %s stopped", settings.executor_id)


def _executor(settings: ExecutorSettings, *, bus: KafkaBus, store: RedisStore, metrics: ExecutorMetrics) -> Executor:
    # Wall time, not monotonic: lease periods must agree between processes and hosts.
    ledger = UpgradeLedger(store, executor_id=settings.executor_id, lease_s=settings.lease_s)
    return Executor(
        bus=bus,
        ledger=ledger,
        driver=build_driver(settings),
        metrics=metrics,
        executor_id=settings.executor_id,
        topic_prefix=settings.topic_prefix,
        max_concurrent_upgrades=settings.max_concurrent_upgrades,
        wait_poll_s=min(1.0, settings.lease_s / 3),
        probe_before_rerun=settings.probe_before_rerun,
    )


async def _status_server(
    settings: ExecutorSettings, *, service: ExecutorService, metrics: ExecutorMetrics
) -> StatusServer | None:
    """The health and metrics port, started; None when it is turned off."""
    if not settings.metrics_port:
        return None
    status = StatusServer(
        host=settings.metrics_host, port=settings.metrics_port, registry=metrics.registry, ready=lambda: service.ready
    )
    await status.start()
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rollout_executor", description=__doc__)
    parser.add_argument("--config", type=Path, help="YAML file of settings (ROLLOUT_* variables win)")
    args = parser.parse_args(argv)
    try:
        settings = load_settings(args.config)
    except RolloutError as exc:
        print(f"rollout_executor: bad settings: {exc}", file=sys.stderr)
        return 2
    json_logging.configure(settings.log_level, quiet_libraries=False)
    try:
        asyncio.run(run(settings))
    except RolloutError as exc:
        log.error("executor stopped on an error: %s", exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
