"""Redis shut down and restarted twice mid-rollout, no process killed: every cluster is upgraded
exactly once per target and the rollout completes (BUS-3, BUS-6).

The planner, two executors, a health reporter and the health monitor run as processes on the real
broker and on a Redis of the test's own with an append-only file (`appendfsync always`, as the
fault-injection test runs it), so a restart keeps the data but not the time: a lease's TTL keeps
running while Redis is down. The executors run the command driver with `fake_upgrade.py`, which
appends a line to a log at the start and at the end of every call: the test's audit of every
driver call, independent of what the executors publish.

Twice, once per track, while upgrades are running, Redis is stopped for 14 s, longer than the
executors' 10 s lease (the outage and the lease with which the fault was found on the live
services), and started again on its files. The upgrades in flight finish while Redis is
away, so their executors cannot record the results; when Redis answers again the leases they held
have expired. Before the fix such an executor logged `lease lost; the new holder will record the
result`, found no result recorded, took the lease again and ran the driver a second time.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
import yaml
from local_servers import running
from topic_reader import Message, caught_up, completions, produce, read_topic

from rollout_common.topics.catalog import (
    INVENTORY,
    OPERATOR_COMMANDS,
    PROGRESS,
    READINESS,
    RELEASE_TARGETS,
    STAGE_ADVANCE,
    UPGRADE_RESULTS,
)
from rollout_devenv import RedisServer, stop_processes

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

OLD = "1.30.5-gke.1000"
NEW = "1.31.13-gke.1023000"
CLUSTERS = tuple(f"fleet-{i:02d}" for i in range(1, 9))
TRACKS = ("controlPlane", "nodes")
LEASE_S = 10  # the executors' target lease
OUTAGE_S = 14.0  # longer than the lease: the leases held when Redis stopped have expired when it is back
UPGRADE_S = 1.5  # each driver call; 4 at a time per executor
TIME_SCALE = 3600.0  # the 1 h soak takes a wall second
FAKE_UPGRADE = Path(__file__).parents[1] / "executor" / "fake_upgrade.py"
WAIT_S = 60.0  # bound on each condition waited for, for a loaded machine
PLANNER_INPUTS = (INVENTORY, READINESS, UPGRADE_RESULTS, OPERATOR_COMMANDS, RELEASE_TARGETS)


@pytest.fixture
def aof_redis() -> Iterator[RedisServer]:
    with running(RedisServer(aof=True), what="the Redis-restart test's Redis (AOF)") as server:
        yield server


@dataclass
class Services:
    """The services as processes, each logging to a file in `workdir`."""

    workdir: Path
    env: dict[str, str]
    running: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self, name: str, module_args: list[str], env: dict[str, str]) -> None:
        with (self.workdir / f"{name}.log").open("wb") as log:
            self.running[name] = subprocess.Popen(
                [sys.executable, "-m", *module_args],
                env=os.environ | self.env | env,
                cwd=self.workdir,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def check_alive(self) -> None:
        """No process may end by itself: a Redis outage is waited out, never a reason to exit."""
        exited = {name: code for name, p in self.running.items() if (code := p.poll()) is not None}
        assert not exited, f"exited: {exited}\n" + "\n".join(self.log_tail(name) for name in exited)

    def log_tail(self, name: str, chars: int = 3000) -> str:
        return (self.workdir / f"{name}.log").read_text(errors="replace")[-chars:]

    def stop_all(self) -> None:
        stop_processes(self.running.values(), grace_s=15.0)


@dataclass(frozen=True)
class DriverLog:
    """What `fake_upgrade.py` wrote: `start|done CLUSTER TRACK VERSION`, one line per event."""

    path: Path

    def events(self) -> list[tuple[str, str, str, str]]:
        if not self.path.exists():
            return []
        text = self.path.read_text()
        # A line being written as we read is left for the next read.
        lines = text.splitlines() if text.endswith("\n") else text.splitlines()[:-1]
        return [(event, cluster, track, version) for event, cluster, track, version in (line.split() for line in lines)]

    def calls(self) -> Counter[tuple[str, str, str]]:
        """How often the driver was called per (cluster, track, version)."""
        return Counter((c, t, v) for event, c, t, v in self.events() if event == "start")

    def running(self, track: str) -> set[str]:
        """Clusters whose driver call on `track` has started and not finished."""
        events = self.events()
        started = Counter(c for e, c, t, _ in events if e == "start" and t == track)
        done = Counter(c for e, c, t, _ in events if e == "done" and t == track)
        return {cluster for cluster in started if started[cluster] > done[cluster]}


def fleet_document() -> dict[str, Any]:
    return {
        "name": "redis-restart",
        "generate": [{"count": len(CLUSTERS), "name": "fleet-{i:02d}", "labels": {"env": "fleet"}, "version": OLD}],
        "sequence": {
            "name": "redis-restart",
            "channel": "regular",
            "stages": [
                {
                    "name": "fleet",
                    "clusterSelector": {"matchLabels": {"env": "fleet"}},
                    "soak": "1h",
                    "rolloutStrategy": {"maxNew": 4, "maxUnavailable": "50%"},
                }
            ],
        },
    }


def apply_fleet(workdir: Path, *, prefix: str, kafka_bootstrap: str, redis_url: str) -> None:
    path = workdir / "fleet.yaml"
    path.write_text(yaml.safe_dump(fleet_document()))
    command = [sys.executable, "-m", "rollout_cli.main", "apply", str(path), "--bootstrap", kafka_bootstrap]
    command += ["--redis", redis_url, "--topic-prefix", prefix, "--namespace", prefix]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


def start_services(services: Services, *, prefix: str, driver_log: DriverLog) -> None:
    services.start(
        "planner",
        ["rollout_planner.service"],
        {
            "ROLLOUT_REDIS_NAMESPACE": prefix,
            "ROLLOUT_TIME_SCALE": str(TIME_SCALE),
            "ROLLOUT_HTTP_PORT": "0",
            "ROLLOUT_POLL_TIMEOUT_S": "0.2",
            "ROLLOUT_LEASE_TTL_S": "3",
            "ROLLOUT_LEASE_RETRY_S": "0.2",
        },
    )
    for number in range(2):
        services.start(
            f"executor-{number}",
            ["rollout_executor"],
            {
                "ROLLOUT_EXECUTOR_ID": f"executor-{number}",
                "ROLLOUT_GROUP_ID": f"{prefix}executors",
                "ROLLOUT_REDIS_NAMESPACE": f"{prefix}executors",
                "ROLLOUT_DRIVER": "command",
                "ROLLOUT_COMMAND__EXECUTABLE": sys.executable,
                "ROLLOUT_COMMAND__ARGS": json.dumps([str(FAKE_UPGRADE), str(driver_log.path), str(UPGRADE_S)]),
                "ROLLOUT_MAX_CONCURRENT_UPGRADES": "4",
                "ROLLOUT_LEASE_S": str(LEASE_S),
                "ROLLOUT_METRICS_PORT": "0",
            },
        )
    services.start(
        "reporter",
        ["rollout_health", "reporter"],
        {
            "ROLLOUT_CLUSTERS": json.dumps(list(CLUSTERS)),
            "ROLLOUT_PROBE_INTERVAL_S": "0.2",
            "ROLLOUT_HEARTBEAT_INTERVAL_S": "2",
            "ROLLOUT_SIMULATED__READY_AFTER_S": "0.3",
        },
    )
    services.start(
        "monitor",
        ["rollout_health", "monitor"],
        {
            "ROLLOUT_STALENESS_LIMIT_S": "60",
            "ROLLOUT_CHECK_INTERVAL_S": "1",
            "ROLLOUT_DATA_DIR": str(services.workdir / "monitor-data"),
        },
    )


async def wait_until(condition: Callable[[], bool], *, services: Services, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        services.check_alive()
        assert time.monotonic() < deadline, f"not within {WAIT_S:g} s: {what}"
        await asyncio.sleep(0.1)


async def publish_release(kafka_bootstrap: str, prefix: str) -> None:
    """As a platform team would, with its own client and the documented headers."""
    body = {"eventId": "rel-redis-restart", "channel": "regular", "targets": {"1.30": NEW}}
    await produce(
        kafka_bootstrap,
        prefix + RELEASE_TARGETS.name,
        key=b"regular",
        value=json.dumps(body).encode(),
        headers=[
            ("ce_specversion", b"1.0"),
            ("ce_id", b"rel-redis-restart"),
            ("ce_source", b"platform-team"),
            ("ce_type", b"io.rollout.release_target.v1"),
            ("content-type", b"application/json"),
        ],
    )


async def redis_restart_mid_upgrades(
    redis: RedisServer, *, track: str, driver_log: DriverLog, services: Services
) -> set[str]:
    """Stop Redis while upgrades of `track` run, keep it away for OUTAGE_S and at least until they
    have all finished, then start it again on its files. Returns the clusters whose upgrade
    finished while Redis was away (their results could not be recorded)."""
    await wait_until(
        lambda: len(driver_log.running(track)) >= 2, services=services, what=f"two {track} upgrades running"
    )
    await asyncio.to_thread(redis.stop)
    stopped_at = time.monotonic()
    in_flight = driver_log.running(track)
    await wait_until(
        lambda: time.monotonic() - stopped_at >= OUTAGE_S and not in_flight & driver_log.running(track),
        services=services,
        what=f"the {track} upgrades in flight finishing with Redis away",
    )
    await asyncio.to_thread(redis.start)
    return in_flight


async def wait_for_fleet(redis_url: str, prefix: str, services: Services) -> None:
    """The planner has taken in the whole inventory (what `rollout status` would show)."""
    client = aioredis.Redis.from_url(redis_url)
    try:
        deadline = time.monotonic() + WAIT_S
        while (raw := await client.get(f"{prefix}:status")) is None or json.loads(raw)["clusters"] != len(CLUSTERS):
            services.check_alive()
            assert time.monotonic() < deadline, f"the planner did not take in the fleet within {WAIT_S:g} s"
            await asyncio.sleep(0.2)
    finally:
        await client.aclose()


async def test_bus3_a_redis_restarted_twice_mid_rollout_repeats_no_upgrade(
    tmp_path: Path, kafka_bootstrap: str, aof_redis: RedisServer, topic_prefix: str
) -> None:
    prefix = topic_prefix + "."
    driver_log = DriverLog(tmp_path / "driver-calls.log")
    services = Services(
        workdir=tmp_path,
        env={
            "ROLLOUT_KAFKA_BOOTSTRAP": kafka_bootstrap,
            "ROLLOUT_REDIS_URL": aof_redis.url,
            "ROLLOUT_TOPIC_PREFIX": prefix,
            "ROLLOUT_LOG_LEVEL": "INFO",
        },
    )
    try:
        # The planner waits for the sequence that apply writes; the release waits on its topic.
        start_services(services, prefix=prefix, driver_log=driver_log)
        apply_fleet(tmp_path, prefix=prefix, kafka_bootstrap=kafka_bootstrap, redis_url=aof_redis.url)
        await wait_for_fleet(aof_redis.url, prefix, services)
        await publish_release(kafka_bootstrap, prefix)

        caught = [
            await redis_restart_mid_upgrades(aof_redis, track=track, driver_log=driver_log, services=services)
            for track in TRACKS
        ]

        def every_track_complete(records: list[Message]) -> bool:
            services.check_alive()
            return len(completions(records)) == len(TRACKS)

        progress = await read_topic(
            kafka_bootstrap, prefix + PROGRESS.name, until=every_track_complete, timeout_s=WAIT_S
        )
        # Everything the planner and the executors were given is handled: a repeat would be logged.
        await caught_up(kafka_bootstrap, prefix + "rollout-planner", [prefix + t.name for t in PLANNER_INPUTS])
        await caught_up(kafka_bootstrap, f"{prefix}executors", [prefix + STAGE_ADVANCE.name])
    finally:
        services.stop_all()

    # Each outage caught upgrades in flight: they finished with Redis away, their results unrecorded.
    assert all(caught), caught
    assert completions(progress) == {("fleet", "controlPlane"): NEW, ("fleet", "nodes"): NEW}
    repeated = {key: n for key, n in driver_log.calls().items() if n != 1}
    assert repeated == {}, f"upgraded more than once (caught in flight: {caught})"
    assert set(driver_log.calls()) == {(cluster, track, NEW) for cluster in CLUSTERS for track in TRACKS}
