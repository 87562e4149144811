"""Setting up the whole system for an end-to-end test: fleet applied with the CLI, services
started as processes, a release published by an outside producer with the documented headers."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
import yaml
from aiokafka import AIOKafkaProducer
from service_processes import ServiceProcesses
from topic_reader import Message, caught_up, read_topic

from rollout_common.topics.catalog import (
    INVENTORY,
    OPERATOR_COMMANDS,
    READINESS,
    RELEASE_TARGETS,
    STAGE_ADVANCE,
    UPGRADE_RESULTS,
)

PLANNER_GROUP = (
    "rollout-planner"  # the planner's default consumer group, under the topic prefix (start_system keeps it)
)
PLANNER_INPUTS = (INVENTORY, READINESS, UPGRADE_RESULTS, OPERATOR_COMMANDS, RELEASE_TARGETS)


@dataclass(frozen=True)
class Pace:
    """How fast the simulated world runs: the planner's time scale and the services' timings."""

    time_scale: float
    upgrade_s: float
    max_concurrent: int
    ready_after_s: float


def staged_fleet(
    *,
    name: str,
    stages: Sequence[str],
    per_stage: int,
    version: str,
    soak: str | Mapping[str, str],
    max_new: int,
    sequence_name: str | None = None,
) -> dict[str, Any]:
    """A scenario document: per stage, `per_stage` clusters on `version` labelled `env: <stage>`
    (named as `staged_cluster_names` lists them), and a sequence on the `regular` channel taking
    the stages in order, each selecting its own clusters, soaking `soak` (one duration, or one
    per stage) and upgrading at most `max_new` clusters at a time, half of the stage at most."""
    return {
        "name": name,
        "generate": [
            {"count": per_stage, "name": f"{stage}-{{i:02d}}", "labels": {"env": stage}, "version": version}
            for stage in stages
        ],
        "sequence": {
            "name": sequence_name or name,
            "channel": "regular",
            "stages": [
                {
                    "name": stage,
                    "clusterSelector": {"matchLabels": {"env": stage}},
                    "soak": soak if isinstance(soak, str) else soak[stage],
                    "rolloutStrategy": {"maxNew": max_new, "maxUnavailable": "50%"},
                }
                for stage in stages
            ],
        },
    }


def staged_cluster_names(stages: Sequence[str], per_stage: int) -> list[str]:
    """The clusters of `staged_fleet`, stage by stage."""
    return [f"{stage}-{i:02d}" for stage in stages for i in range(1, per_stage + 1)]


def apply_fleet(document: dict[str, Any], *, tmp_path: Path, prefix: str, kafka_bootstrap: str, redis_url: str) -> None:
    """`rollout apply` of a scenario document, as an operator would."""
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(document))
    command = [sys.executable, "-m", "rollout_cli.main", "apply", str(path), "--bootstrap", kafka_bootstrap]
    command += ["--redis", redis_url, "--topic-prefix", prefix, "--namespace", prefix]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


def start_system(
    services: ServiceProcesses,
    *,
    prefix: str,
    clusters: list[str],
    pace: Pace,
    planner_env: Mapping[str, str] | None = None,
    executor_env: Mapping[str, str] | None = None,
) -> None:
    """The planner, two executors, a health reporter and the health monitor, as processes; the
    extra variables go to the planner and to each executor on top of the defaults."""
    services.start(
        "planner",
        ["rollout_planner.service"],
        {
            "ROLLOUT_REDIS_NAMESPACE": prefix,
            "ROLLOUT_TIME_SCALE": str(pace.time_scale),
            "ROLLOUT_HTTP_PORT": "0",
            "ROLLOUT_POLL_TIMEOUT_S": "0.2",
            # A planner restarted after a kill stands by until its predecessor's lease lapses.
            "ROLLOUT_LEASE_TTL_S": "3",
            "ROLLOUT_LEASE_RETRY_S": "0.2",
        }
        | dict(planner_env or {}),
    )
    for number in range(2):
        services.start(
            f"executor-{number}",
            ["rollout_executor"],
            {
                "ROLLOUT_EXECUTOR_ID": f"executor-{number}",
                "ROLLOUT_GROUP_ID": f"{prefix}executors",
                "ROLLOUT_REDIS_NAMESPACE": f"{prefix}executors",
                "ROLLOUT_DRIVER": "simulated",
                "ROLLOUT_SIMULATED__DURATIONS_S": json.dumps({"controlPlane": pace.upgrade_s, "nodes": pace.upgrade_s}),
                "ROLLOUT_MAX_CONCURRENT_UPGRADES": str(pace.max_concurrent),
                "ROLLOUT_LEASE_S": "3",
                "ROLLOUT_METRICS_PORT": "0",
            }
            | dict(executor_env or {}),
        )
    services.start(
        "reporter",
        ["rollout_health", "reporter"],
        {
            "ROLLOUT_CLUSTERS": json.dumps(clusters),
            "ROLLOUT_PROBE_INTERVAL_S": "0.2",
            "ROLLOUT_HEARTBEAT_INTERVAL_S": "2",
            "ROLLOUT_SIMULATED__READY_AFTER_S": str(pace.ready_after_s),
        },
    )
    services.start(
        "monitor",
        ["rollout_health", "monitor"],
        {
            "ROLLOUT_STALENESS_LIMIT_S": "60",
            "ROLLOUT_CHECK_INTERVAL_S": "1",
            "ROLLOUT_DATA_DIR": str(services.log_dir / "monitor-data"),
        },
    )


async def wait_for_fleet(redis_url: str, prefix: str, services: ServiceProcesses, *, clusters: int) -> None:
    """The planner has taken in the whole inventory (what `rollout status` would show)."""
    await wait_for_status(redis_url, prefix, services, until=lambda document: document["clusters"] == clusters)


async def wait_for_status(
    redis_url: str,
    prefix: str,
    services: ServiceProcesses,
    *,
    until: Callable[[dict[str, Any]], bool],
    timeout_s: float = 60.0,
) -> dict[str, Any]:
    """The first status document for which `until` holds. The planner writes the document after it
    publishes a batch's messages, so a reader of the progress topic can be ahead of it."""
    client = aioredis.Redis.from_url(redis_url)
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                assert not services.exited(), f"exited: {services.exited()}\n{services.log_tail('planner')}"
                raw = await client.get(f"{prefix}:status")
                document = None if raw is None else json.loads(raw)
                if document is not None and until(document):
                    return document  # type: ignore[no-any-return]
                await asyncio.sleep(0.2)
    finally:
        await client.aclose()


async def publish_release(kafka_bootstrap: str, prefix: str, *, event_id: str, targets: dict[str, str]) -> None:
    """As a platform team would, with its own client and the documented headers."""
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        body = {"eventId": event_id, "channel": "regular", "targets": targets}
        await producer.send_and_wait(
            prefix + RELEASE_TARGETS.name,
            json.dumps(body).encode(),
            key=b"regular",
            headers=[
                ("ce_specversion", b"1.0"),
                ("ce_id", event_id.encode()),
                ("ce_source", b"platform-team"),
                ("ce_type", b"io.rollout.release_target.v1"),
                ("content-type", b"application/json"),
            ],
        )
    finally:
        await producer.stop()


async def read_until(
    kafka_bootstrap: str,
    topic: str,
    partitions: int,
    done: Callable[[list[Message]], bool],
    *,
    timeout_s: float,
    on_poll: Callable[[list[Message]], None] | None = None,
) -> list[Message]:
    """Every record of `topic` from the beginning, read until `done` holds."""
    return await read_topic(
        kafka_bootstrap, topic, until=done, timeout_s=timeout_s, partitions=partitions, on_poll=on_poll
    )


async def settled(kafka_bootstrap: str, prefix: str) -> None:
    """The planner and the executors have handled every record now on their input topics, so what
    they publish in answer (a wrongly repeated batch or upgrade included) is on the topics."""
    await caught_up(kafka_bootstrap, prefix + PLANNER_GROUP, [prefix + t.name for t in PLANNER_INPUTS])
    await caught_up(kafka_bootstrap, f"{prefix}executors", [prefix + STAGE_ADVANCE.name])
