"""SIGTERM ends every service within a bound even with Kafka and Redis down (issue: an executor
and a reporter kept running 13 and 21 minutes with the broker gone).

Each service runs as a process against a broker and a Redis of this module's own; once every
one of them is up, both servers are stopped, and once every service has logged a failed call
(they are inside their retry loops), each gets SIGTERM and must exit within `BOUND_S`.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from local_servers import running
from service_processes import ServiceProcesses

from rollout_devenv import KafkaBroker, RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

# Stated in docs/reliability.md: the executor's shutdown_grace_s (2 here) or the planner's, plus
# closing the clients (5 s each at most), plus the interpreter's exit.
BOUND_S = 20.0


@pytest.fixture
def servers() -> Iterator[tuple[KafkaBroker, RedisServer]]:
    with (
        running(KafkaBroker(), what="the shutdown test's Kafka broker") as broker,
        running(RedisServer(), what="the shutdown test's Redis") as redis,
    ):
        yield broker, redis


def scenario(path: Path) -> Path:
    path.write_text(
        json.dumps(
            {
                "name": "shutdown",
                "generate": [{"count": 2, "name": "c-{i:02d}", "labels": {"env": "dev"}, "version": "1.30.5"}],
                "sequence": {
                    "name": "shutdown",
                    "channel": "regular",
                    "stages": [{"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}}],
                },
            }
        )
    )
    return path


async def wait_for_log(services: ServiceProcesses, name: str, texts: tuple[str, ...], *, after: int = 0) -> None:
    async with asyncio.timeout(90):
        while True:
            tail = services.log_tail(name, 10_000_000)[after:]
            if any(text in tail for text in texts):
                return
            assert services.running[name].poll() is None, f"{name} exited:\n{services.log_tail(name)}"
            await asyncio.sleep(0.2)


async def test_sigterm_ends_every_service_within_the_bound_with_kafka_and_redis_down(
    tmp_path: Path, servers: tuple[KafkaBroker, RedisServer], topic_prefix: str
) -> None:
    broker, redis = servers
    services = ServiceProcesses(
        log_dir=tmp_path,
        base_env={
            "ROLLOUT_KAFKA_BOOTSTRAP": broker.bootstrap,
            "ROLLOUT_REDIS_URL": redis.url,
            "ROLLOUT_TOPIC_PREFIX": topic_prefix + ".",
            "ROLLOUT_LOG_LEVEL": "INFO",
        },
    )
    up = {
        "planner": ("planner started",),
        "executor": ("starting",),
        "reporter": ("probe",),
    }
    try:
        services.start(
            "planner",
            ["rollout_planner.service"],
            {"ROLLOUT_SCENARIO_FILE": str(scenario(tmp_path / "fleet.json")), "ROLLOUT_HTTP_PORT": "0"},
        )
        services.start(
            "executor",
            ["rollout_executor"],
            {"ROLLOUT_METRICS_PORT": "0", "ROLLOUT_SHUTDOWN_GRACE_S": "2"},
        )
        services.start(
            "reporter",
            ["rollout_health", "reporter"],
            {
                "ROLLOUT_CLUSTERS": json.dumps([f"c-{i:02d}" for i in range(50)]),
                "ROLLOUT_METRICS_PORT": "0",
                "ROLLOUT_CREATE_TOPICS": "true",
            },
        )
        for name, texts in up.items():
            await wait_for_log(services, name, texts)
        marks = {name: len(services.log_tail(name, 10_000_000)) for name in up}

        await asyncio.to_thread(broker.stop)
        await asyncio.to_thread(redis.stop)
        failing = {
            "planner": ("retrying", "failed", "unreachable"),
            "executor": ("retrying", "failed"),
            "reporter": ("not published", "retrying"),
        }
        for name, texts in failing.items():
            await wait_for_log(services, name, texts, after=marks[name])

        took: dict[str, float] = {}
        for name in up:
            services.running[name].send_signal(signal.SIGTERM)
        started = time.monotonic()
        for name in up:
            code = await asyncio.to_thread(services.running[name].wait, BOUND_S * 3)
            took[name] = round(time.monotonic() - started, 1)
            assert code == 0, f"{name} exited {code}:\n{services.log_tail(name)}"
        print(f"\nSIGTERM to exit with Kafka and Redis down: {took}")
        assert {name: s for name, s in took.items() if s > BOUND_S} == {}
    finally:
        services.stop_all()
