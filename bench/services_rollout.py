"""A whole rollout through the real services over Kafka, with time compressed.

The planner (`python -m rollout_planner.service`, the fleet from a scenario file) and executor
processes (simulated driver) run against the broker and Redis; this process produces the release
target as a platform team would and reads the progress topic until every stage and track is
COMPLETE. Stages of 5/25/70% of the fleet (the simulator benchmark's 3-stage rollout), default
rolloutStrategy (maxUnavailable 100%, maxNew 50, autoPartitionSize 25%), soak 1h per stage with
the planner's time scale at 3600 (1 s per soak); upgrades take 50 ms per track.

No health services run: with maxUnavailable 100% readiness gates nothing (GATE-4), and a health
reporter probing 10k simulated clusters would mostly measure itself. Wall time runs from the
release target's production to the last COMPLETE; CPU time is the processes' own (/proc).

    python -m bench.services_rollout --clusters 10000 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml
from aiokafka import AIOKafkaConsumer, TopicPartition

from bench.kafka_common import (
    Services,
    enveloped,
    fresh_prefix,
    group_stable,
    infrastructure,
    load_average,
    produce_all,
)
from rollout_adapters.kafka_bus import KafkaBus
from rollout_common.events import ReleaseTarget
from rollout_common.topics import ALL
from rollout_common.topics.catalog import PROGRESS, RELEASE_TARGETS

OLD = "1.30.5-gke.1000"
NEW = "1.31.13-gke.1023000"
SHARES = (("dev", 0.05), ("staging", 0.25), ("prod", 0.70))
TIME_SCALE = 3600.0
UPGRADE_S = 0.05
EXECUTORS = 2
CONCURRENCY = 50


@dataclass
class ServicesRolloutResult:
    clusters: int
    stages: int
    executors: int
    wall_s: float
    cpu_s: dict[str, float]
    cpu_total_s: float
    upgrades: int
    batches: int
    progress_messages: int
    complete: bool
    startup_s: float
    load: str


def scenario(clusters: int) -> dict[str, Any]:
    counts = [int(clusters * share) for _, share in SHARES]
    counts[-1] = clusters - sum(counts[:-1])
    return {
        "name": "bench-services",
        "generate": [
            {"count": count, "name": f"{stage}-{{i:06d}}", "labels": {"env": stage}, "version": OLD}
            for (stage, _), count in zip(SHARES, counts, strict=True)
        ],
        "sequence": {
            "name": "bench-services",
            "channel": "regular",
            "stages": [
                {"name": stage, "clusterSelector": {"matchLabels": {"env": stage}}, "soak": "1h"} for stage, _ in SHARES
            ],
        },
    }


async def measure_async(
    bootstrap: str, redis_url: str, clusters: int, log_dir: Path, timeout_s: float
) -> ServicesRolloutResult:
    load_before = load_average()
    prefix = fresh_prefix("rollout")
    path = log_dir / "fleet.yaml"
    path.write_text(yaml.safe_dump(scenario(clusters)))
    bus = KafkaBus(bootstrap, client_id="bench-setup")
    try:
        await bus.ensure_topics([t.spec(prefix) for t in ALL])
    finally:
        await bus.close()
    services = Services(
        log_dir,
        {
            "ROLLOUT_KAFKA_BOOTSTRAP": bootstrap,
            "ROLLOUT_REDIS_URL": redis_url,
            "ROLLOUT_TOPIC_PREFIX": prefix,
            "ROLLOUT_LOG_LEVEL": "WARNING",
        },
    )
    progress = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    started = time.perf_counter()
    try:
        services.start(
            "planner",
            ["rollout_planner.service"],
            {
                "ROLLOUT_REDIS_NAMESPACE": prefix,
                "ROLLOUT_PLANNER_GROUP": prefix + "planner",
                "ROLLOUT_SCENARIO_FILE": str(path),
                "ROLLOUT_TIME_SCALE": str(TIME_SCALE),
                "ROLLOUT_HTTP_PORT": "0",
                "ROLLOUT_POLL_TIMEOUT_S": "0.2",
            },
        )
        for number in range(EXECUTORS):
            services.start(
                f"executor-{number}",
                ["rollout_executor"],
                {
                    "ROLLOUT_GROUP_ID": prefix + "executors",
                    "ROLLOUT_REDIS_NAMESPACE": prefix + "executors",
                    "ROLLOUT_EXECUTOR_ID": f"bench-{number}",
                    "ROLLOUT_DRIVER": "simulated",
                    "ROLLOUT_SIMULATED__DURATIONS_S": json.dumps({"controlPlane": UPGRADE_S, "nodes": UPGRADE_S}),
                    "ROLLOUT_MAX_CONCURRENT_UPGRADES": str(CONCURRENCY),
                    "ROLLOUT_METRICS_PORT": "0",
                },
            )
        await group_stable(bootstrap, prefix + "executors", EXECUTORS)
        await group_stable(bootstrap, prefix + "planner", 1)
        services.check()
        startup_s = time.perf_counter() - started
        await progress.start()
        parts = [TopicPartition(prefix + PROGRESS.name, p) for p in range(PROGRESS.partitions)]
        progress.assign(parts)
        await progress.seek_to_beginning(*parts)
        cpu_before = services.cpu_s()
        release = ReleaseTarget(event_id=f"{prefix}release", channel="regular", targets={"1.30": NEW})
        start = time.perf_counter()
        await produce_all(
            bootstrap,
            prefix + RELEASE_TARGETS.name,
            [enveloped(release, event_id=release.event_id, key="regular", source="platform-team")],
        )
        complete: set[tuple[str, str]] = set()
        messages = batches = upgrades = 0
        end = start
        wanted = {(stage, track) for stage, _ in SHARES for track in ("controlPlane", "nodes")}
        try:
            async with asyncio.timeout(timeout_s):
                while complete != wanted:
                    for records in (await progress.getmany(timeout_ms=500)).values():
                        for record in records:
                            messages += 1
                            body = json.loads(record.value)
                            if body["kind"] == "stage_advance":
                                batches += 1
                                upgrades += len(body["clusters"])
                            elif body["kind"] == "stage_transition" and body["state"] == "COMPLETE":
                                complete.add((body["stage"], body["track"]))
                                end = time.perf_counter()
                    services.check()
        except TimeoutError:
            end = time.perf_counter()
        cpu_after = services.cpu_s()
    finally:
        services.stop_all()
        await progress.stop()
    cpu = {name: cpu_after[name] - cpu_before[name] for name in cpu_after}
    return ServicesRolloutResult(
        clusters=clusters,
        stages=len(SHARES),
        executors=EXECUTORS,
        wall_s=end - start,
        cpu_s=cpu,
        cpu_total_s=sum(cpu.values()),
        upgrades=upgrades,
        batches=batches,
        progress_messages=messages,
        complete=complete == wanted,
        startup_s=startup_s,
        load=f"{load_before} before, {load_average()} after",
    )


def measure(
    clusters: int, *, bootstrap: str | None = None, redis_url: str | None = None, timeout_s: float = 240.0
) -> ServicesRolloutResult:
    with infrastructure(bootstrap, redis_url) as infra, tempfile.TemporaryDirectory(prefix="bench-rollout-") as tmp:
        return asyncio.run(measure_async(infra.bootstrap, infra.redis_url, clusters, Path(tmp), timeout_s))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=10_000)
    parser.add_argument("--timeout", type=float, default=240.0)
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--redis-url", default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = measure(args.clusters, bootstrap=args.bootstrap, redis_url=args.redis_url, timeout_s=args.timeout)
    print(json.dumps(asdict(result)) if args.json else json.dumps(asdict(result), indent=1))


if __name__ == "__main__":
    main()
