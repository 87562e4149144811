"""Decision latency: a readiness event that opens GATE-1 -> the stage-advance command it causes.

The planner runs as its own process (`python -m rollout_planner.service`, a scenario file for
its fleet). The fleet is one stage with one partition, maxUnavailable 1 and maxNew 1, so exactly
one cluster is in flight: each cluster's control plane and nodes are upgraded (this benchmark
answers the commands as an executor would, untimed), it is then unavailable until it reports
ready, and that readiness event opens the gate for exactly one new batch: the next cluster's
control plane. A trial times, in this process, from producing that readiness event to an
independent consumer of the stage-advance topic (all 16 partitions assigned) receiving the batch.

Before each readiness event the benchmark waits until the planner's checkpoint in Redis shows
the nodes result applied, so a trial never includes an earlier decision. Each trial is paired
with a raw round trip in the same run: the same producer settings (acks=all, idempotent, no
linger) to a one-partition topic, received by a consumer of that topic.

    python -m bench.decision_latency --trials 1000 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
import yaml
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from bench.kafka_common import Services, enveloped, fresh_prefix, infrastructure, load_average, percentile
from rollout_adapters.kafka_bus import KafkaBus
from rollout_common.commands import StageAdvance
from rollout_common.envelope import decode
from rollout_common.events import Readiness, ReleaseTarget, UpgradeResult
from rollout_common.ports import TopicSpec
from rollout_common.status import Track
from rollout_common.topics import ALL
from rollout_common.topics.catalog import READINESS, RELEASE_TARGETS, STAGE_ADVANCE, UPGRADE_RESULTS
from rollout_planner.service.checkpoint import CHECKPOINT_KEY

OLD = "1.30.5-gke.1000"
NEW = "1.31.13-gke.1023000"
WARMUP = 20
WAIT_S = 30.0


@dataclass
class LatencyResult:
    trials: int
    clusters: int
    planner_ms: dict[str, float]
    raw_ms: dict[str, float]
    ratio_p99: float
    ratio_p50: float
    load: str
    until_publish_ms: dict[str, float] = field(default_factory=dict)  # readiness produced -> batch record created
    after_publish_ms: dict[str, float] = field(default_factory=dict)  # batch record created -> received
    persist_floor_ms: dict[str, float] = field(default_factory=dict)  # one snapshot + status build, this fleet
    redis_rtt_ms: dict[str, float] = field(default_factory=dict)  # one Redis round trip (PING), once per trial
    samples_ms: list[float] = field(default_factory=list)
    raw_samples_ms: list[float] = field(default_factory=list)


def scenario(clusters: int) -> dict[str, Any]:
    return {
        "name": "latency",
        "generate": [{"count": clusters, "name": "c-{i:05d}", "labels": {"env": "prod"}, "version": OLD}],
        "sequence": {
            "name": "latency",
            "channel": "regular",
            "stages": [
                {
                    "name": "prod",
                    "clusterSelector": {"matchLabels": {"env": "prod"}},
                    "soak": "1d",
                    "rolloutStrategy": {
                        "maxUnavailable": 1,
                        "maxNew": 1,
                        "autoPartitionThreshold": clusters + 1,  # one partition
                    },
                }
            ],
        },
    }


def persist_floor_ms(clusters: int, repeats: int = 15) -> dict[str, float]:
    """What every planner batch pays at this fleet size before anything is published: building the
    engine snapshot and the status document (median of `repeats`, in this process, mid-rollout)."""
    import statistics

    from rollout_planner.engine import decide, snapshot
    from rollout_planner.service.initial_state import from_file
    from rollout_planner.service.status_document import encode_status

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fleet.yaml"
        path.write_text(yaml.safe_dump(scenario(clusters)))
        state = from_file(path)
    decide(state, ReleaseTarget(event_id="floor", channel="regular", targets={"1.30": NEW}), time.time())
    dumps, statuses = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        snapshot.dump(state)
        dumps.append(time.perf_counter() - start)
        start = time.perf_counter()
        encode_status(state, batch=1)
        statuses.append(time.perf_counter() - start)
    return {"snapshot_dump": statistics.median(dumps) * 1000, "encode_status": statistics.median(statuses) * 1000}


def _summary(values_s: list[float]) -> dict[str, float]:
    ms = sorted(v * 1000 for v in values_s)
    return {
        "p50": percentile(ms, 0.50),
        "p95": percentile(ms, 0.95),
        "p99": percentile(ms, 0.99),
        "max": ms[-1],
        "mean": sum(ms) / len(ms),
    }


class _Advances:
    """Stage-advance commands as an independent consumer receives them, with their receipt time."""

    def __init__(self, consumer: AIOKafkaConsumer) -> None:
        self._consumer = consumer
        self._buffer: list[tuple[float, float, StageAdvance]] = []
        self.created_ms = 0.0  # CreateTime of the last record returned (the planner's producer clock)

    async def next(self) -> tuple[float, StageAdvance]:
        """(receipt time on the perf_counter clock, the command)."""
        async with asyncio.timeout(WAIT_S):
            while not self._buffer:
                batches = await self._consumer.getmany(timeout_ms=1000)
                now = time.perf_counter()
                for records in batches.values():
                    for r in records:
                        _, model = decode(r.value, dict(r.headers), STAGE_ADVANCE.models)
                        assert isinstance(model, StageAdvance)
                        self._buffer.append((now, r.timestamp, model))
        now, created, model = self._buffer.pop(0)
        self.created_ms = created
        return now, model


async def _applied(client: aioredis.Redis, namespace: str, topic: str, partition: int, offset: int) -> None:
    """Until the planner's persisted checkpoint contains the record at (topic, partition, offset)."""
    key = f"{namespace}:{CHECKPOINT_KEY}"
    async with asyncio.timeout(WAIT_S):
        while True:
            raw = await client.get(key)
            if raw is not None and json.loads(raw)["offsets"].get(f"{topic}:{partition}", 0) > offset:
                return
            await asyncio.sleep(0.001)


async def measure_async(bootstrap: str, redis_url: str, trials: int, log_dir: Path) -> LatencyResult:
    load_before = load_average()
    prefix = fresh_prefix("latency")
    clusters = trials + WARMUP + 2
    path = log_dir / "latency-fleet.yaml"
    path.write_text(yaml.safe_dump(scenario(clusters)))
    raw_topic = prefix + "bench.raw-roundtrip"
    bus = KafkaBus(bootstrap, client_id="bench-setup")
    try:
        await bus.ensure_topics([t.spec(prefix) for t in ALL] + [TopicSpec(name=raw_topic, partitions=1)])
    finally:
        await bus.close()
    services = Services(log_dir, {"ROLLOUT_KAFKA_BOOTSTRAP": bootstrap, "ROLLOUT_REDIS_URL": redis_url})
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=0)
    advances_consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=500)
    raw_consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=500)
    client = aioredis.Redis.from_url(redis_url)
    planner_s: list[float] = []
    raw_s: list[float] = []
    until_publish_s: list[float] = []
    redis_s: list[float] = []
    try:
        await producer.start()
        await advances_consumer.start()
        await raw_consumer.start()
        advance_parts = [TopicPartition(prefix + STAGE_ADVANCE.name, p) for p in range(STAGE_ADVANCE.partitions)]
        advances_consumer.assign(advance_parts)
        await advances_consumer.seek_to_beginning(*advance_parts)
        raw_part = TopicPartition(raw_topic, 0)
        raw_consumer.assign([raw_part])
        await raw_consumer.seek_to_beginning(raw_part)
        services.start(
            "planner",
            ["rollout_planner.service"],
            {
                "ROLLOUT_TOPIC_PREFIX": prefix,
                "ROLLOUT_REDIS_NAMESPACE": prefix,
                "ROLLOUT_PLANNER_GROUP": prefix + "planner",
                "ROLLOUT_SCENARIO_FILE": str(path),
                "ROLLOUT_HTTP_PORT": "0",
                "ROLLOUT_LOG_LEVEL": "WARNING",
            },
        )

        async def send(topic: str, model: Any, key: str, event_id: str) -> tuple[int, int]:
            k, value, headers = enveloped(model, event_id=event_id, key=key)
            meta = await producer.send_and_wait(topic, value, key=k, headers=list(headers.items()))
            return meta.partition, meta.offset

        release = ReleaseTarget(event_id=f"{prefix}release", channel="regular", targets={"1.30": NEW})
        await send(prefix + RELEASE_TARGETS.name, release, "regular", release.event_id)
        advances = _Advances(advances_consumer)
        results_topic = prefix + UPGRADE_RESULTS.name
        _, batch = await advances.next()
        for trial in range(trials + WARMUP):
            services.check()
            # Untimed: upgrade the cluster in flight, control plane then nodes, as an executor would.
            while True:
                assert batch.track is Track.CONTROL_PLANE or batch.track is Track.NODES
                result = UpgradeResult(
                    command_id=batch.command_id,
                    cluster=batch.clusters[0],
                    track=batch.track,
                    version=batch.version,
                    outcome="succeeded",
                )
                partition, offset = await send(
                    results_topic, result, UPGRADE_RESULTS.key(result), f"{batch.command_id}/succeeded"
                )
                if batch.track is Track.NODES:
                    break
                _, batch = await advances.next()
            cluster = batch.clusters[0]
            await _applied(client, prefix, results_topic, partition, offset)

            # Raw round trip, in the same conditions.
            k, value, headers = enveloped(Readiness(cluster=cluster, ready=True), event_id=f"raw-{trial}", key=cluster)
            start = time.perf_counter()
            await producer.send(raw_topic, value, key=k, headers=list(headers.items()))
            async with asyncio.timeout(WAIT_S):
                while not any((await raw_consumer.getmany(timeout_ms=1000)).values()):
                    pass
            raw_elapsed = time.perf_counter() - start

            # The timed decision: readiness in, the next cluster's batch out.
            ready = Readiness(cluster=cluster, ready=True)
            k, value, headers = enveloped(ready, event_id=f"ready-{trial}", key=READINESS.key(ready))
            start_wall = time.time()
            start = time.perf_counter()
            await producer.send(prefix + READINESS.name, value, key=k, headers=list(headers.items()))
            received, batch = await advances.next()
            # Split by the batch record's CreateTime (ms, same machine clock): until the planner's
            # producer took the batch (poll, decide, Redis write), and from there to our consumer.
            to_publish = max(0.0, advances.created_ms / 1000 - start_wall)
            if batch.track is not Track.CONTROL_PLANE or batch.clusters[0] == cluster:
                raise RuntimeError(f"unexpected batch after readiness of {cluster}: {batch}")
            if trial >= WARMUP:
                planner_s.append(received - start)
                raw_s.append(raw_elapsed)
                until_publish_s.append(min(to_publish, received - start))
                # The planner pays one of these per decision (journal + checkpoint): same conditions.
                start = time.perf_counter()
                await client.ping()
                redis_s.append(time.perf_counter() - start)
    finally:
        services.stop_all()
        await client.aclose()
        await producer.stop()
        await advances_consumer.stop()
        await raw_consumer.stop()
    planner = _summary(planner_s)
    raw = _summary(raw_s)
    after_publish = _summary([total - part for total, part in zip(planner_s, until_publish_s, strict=True)])
    return LatencyResult(
        trials=len(planner_s),
        clusters=clusters,
        planner_ms=planner,
        raw_ms=raw,
        ratio_p99=planner["p99"] / raw["p99"],
        ratio_p50=planner["p50"] / raw["p50"],
        load=f"{load_before} before, {load_average()} after",
        until_publish_ms=_summary(until_publish_s),
        after_publish_ms=after_publish,
        persist_floor_ms=persist_floor_ms(clusters),
        redis_rtt_ms=_summary(redis_s),
        samples_ms=[round(v * 1000, 3) for v in planner_s],
        raw_samples_ms=[round(v * 1000, 3) for v in raw_s],
    )


def measure(trials: int, *, bootstrap: str | None = None, redis_url: str | None = None) -> LatencyResult:
    with infrastructure(bootstrap, redis_url) as infra, tempfile.TemporaryDirectory(prefix="bench-latency-") as tmp:
        return asyncio.run(measure_async(infra.bootstrap, infra.redis_url, trials, Path(tmp)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1_000)
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--redis-url", default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = measure(args.trials, bootstrap=args.bootstrap, redis_url=args.redis_url)
    print(json.dumps(asdict(result)) if args.json else json.dumps(asdict(result), indent=1))


if __name__ == "__main__":
    main()
