"""Executor scaling: upgrades per second with 1, 2, 4 and 8 executor processes.

Each run starts N `python -m rollout_executor` processes (simulated driver, every upgrade takes a
fixed 200 ms, default concurrency: 5 upgrades at once per process, 10 commands per poll) in one
consumer group on a fresh stage-advance topic of 16 partitions, waits until the group is stable
with N members, then produces `per_executor * N` single-track upgrades as commands of 5 clusters
(like maxNew batches), keyed by command id so they spread over the partitions. Throughput is
succeeded upgrades / (time of the last `succeeded` result received by an independent consumer of
the results topic - time the first command was produced). Ideal per process: 5 / 0.2 s = 25/s.

    python -m bench.executor_scaling --executors 1 2 4 8 --json
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
from rollout_common.commands import StageAdvance
from rollout_common.status import Track
from rollout_common.topics.catalog import DEAD_LETTER, STAGE_ADVANCE, UPGRADE_RESULTS

UPGRADE_S = 0.2
CONCURRENCY = 5
CLUSTERS_PER_COMMAND = 5
VERSION = "1.31.13-gke.1023000"


@dataclass
class ScalingRun:
    executors: int
    upgrades: int
    wall_s: float
    upgrades_per_s: float
    ideal_per_s: float
    efficiency: float  # throughput(N) / (N * throughput(1)), filled in by measure()
    executor_cpu_s: float
    cpu_per_upgrade_ms: float
    group_stable_s: float
    load: str


async def one_run(bootstrap: str, redis_url: str, executors: int, upgrades: int, log_dir: Path) -> ScalingRun:
    load_before = load_average()
    prefix = fresh_prefix(f"exec{executors}")
    bus = KafkaBus(bootstrap, client_id="bench-setup")
    try:
        await bus.ensure_topics([t.spec(prefix) for t in (STAGE_ADVANCE, UPGRADE_RESULTS, DEAD_LETTER)])
    finally:
        await bus.close()
    group = prefix + "executors"
    services = Services(log_dir, {"ROLLOUT_KAFKA_BOOTSTRAP": bootstrap, "ROLLOUT_REDIS_URL": redis_url})
    results = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        for number in range(executors):
            services.start(
                f"executor-{executors}-{number}",
                ["rollout_executor"],
                {
                    "ROLLOUT_TOPIC_PREFIX": prefix,
                    "ROLLOUT_GROUP_ID": group,
                    "ROLLOUT_REDIS_NAMESPACE": prefix + "executors",
                    "ROLLOUT_EXECUTOR_ID": f"bench-{number}",
                    "ROLLOUT_DRIVER": "simulated",
                    "ROLLOUT_SIMULATED__DURATIONS_S": json.dumps({"controlPlane": UPGRADE_S, "nodes": UPGRADE_S}),
                    "ROLLOUT_SIMULATED__TIME_SCALE": "1",
                    "ROLLOUT_MAX_CONCURRENT_UPGRADES": str(CONCURRENCY),
                    "ROLLOUT_METRICS_PORT": "0",
                    "ROLLOUT_LOG_LEVEL": "WARNING",
                },
            )
        stable_s = await group_stable(bootstrap, group, executors)
        services.check()
        await results.start()
        parts = [TopicPartition(prefix + UPGRADE_RESULTS.name, p) for p in range(UPGRADE_RESULTS.partitions)]
        results.assign(parts)
        await results.seek_to_beginning(*parts)
        commands = []
        for i in range(0, upgrades, CLUSTERS_PER_COMMAND):
            names = tuple(f"c-{j:06d}" for j in range(i, min(i + CLUSTERS_PER_COMMAND, upgrades)))
            command = StageAdvance(
                command_id=f"cmd-{i}",
                rollout_id="bench",
                stage="prod",
                track=Track.CONTROL_PLANE,
                partition="prod-0",
                version=VERSION,
                clusters=names,
            )
            commands.append(enveloped(command, event_id=command.command_id, key=STAGE_ADVANCE.key(command)))
        cpu_before = sum(services.cpu_s().values())
        start = time.perf_counter()
        await produce_all(bootstrap, prefix + STAGE_ADVANCE.name, commands)
        succeeded = 0
        last = start
        async with asyncio.timeout(max(120.0, upgrades * UPGRADE_S / CONCURRENCY * 3)):
            while succeeded < upgrades:
                batches = await results.getmany(timeout_ms=1000)
                for records in batches.values():
                    for record in records:
                        if json.loads(record.value)["outcome"] == "succeeded":
                            succeeded += 1
                            last = time.perf_counter()
                services.check()
        wall = last - start
        cpu = sum(services.cpu_s().values()) - cpu_before
    finally:
        services.stop_all()
        await results.stop()
    return ScalingRun(
        executors=executors,
        upgrades=upgrades,
        wall_s=wall,
        upgrades_per_s=upgrades / wall,
        ideal_per_s=executors * CONCURRENCY / UPGRADE_S,
        efficiency=float("nan"),
        executor_cpu_s=cpu,
        cpu_per_upgrade_ms=cpu / upgrades * 1000,
        group_stable_s=stable_s,
        load=f"{load_before} before, {load_average()} after",
    )


async def measure_async(
    bootstrap: str, redis_url: str, executors: list[int], per_executor: int, log_dir: Path
) -> list[ScalingRun]:
    runs = [await one_run(bootstrap, redis_url, n, per_executor * n, log_dir) for n in executors]
    base = next((r.upgrades_per_s for r in runs if r.executors == 1), None)
    for r in runs:
        if base:
            r.efficiency = r.upgrades_per_s / (r.executors * base)
    return runs


def measure(
    executors: list[int], per_executor: int, *, bootstrap: str | None = None, redis_url: str | None = None
) -> list[ScalingRun]:
    with infrastructure(bootstrap, redis_url) as infra, tempfile.TemporaryDirectory(prefix="bench-exec-") as tmp:
        return asyncio.run(measure_async(infra.bootstrap, infra.redis_url, executors, per_executor, Path(tmp)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executors", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--per-executor", type=int, default=250, help="upgrades per executor process")
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--redis-url", default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    runs = measure(args.executors, args.per_executor, bootstrap=args.bootstrap, redis_url=args.redis_url)
    out: list[dict[str, Any]] = [asdict(r) for r in runs]
    print(json.dumps(out) if args.json else json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
