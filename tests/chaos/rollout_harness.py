"""What the fault-injection campaign and the failover tests both need around a whole rollout: the
fleet document and the stage plans the audit checks against, the health reporter and monitor
processes, the release record that starts it, every record of a topic and a consumer group's lag,
read with plain aiokafka clients, and why the planner waits, from its log."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from chaos_audit import Rec, StagePlan, decode
from chaos_processes import ChaosProcesses

from rollout_common.topics.catalog import RELEASE_TARGETS, TopicDef

# stage -> (clusters, rolloutStrategy)
Stages = dict[str, tuple[int, dict[str, Any]]]


def cluster_names(stages: Stages, stage: str) -> list[str]:
    return [f"{stage}-{i:03d}" for i in range(1, stages[stage][0] + 1)]


def fleet_document(name: str, stages: Stages, *, version: str, channel: str) -> dict[str, Any]:
    """A generated fleet of `stages` at `version`, one stage per env label, each soaking an hour."""
    return {
        "name": name,
        "generate": [
            {"count": count, "name": f"{stage}-{{i:03d}}", "labels": {"env": stage}, "version": version}
            for stage, (count, _) in stages.items()
        ],
        "sequence": {
            "name": name,
            "channel": channel,
            "stages": [
                {
                    "name": stage,
                    "clusterSelector": {"matchLabels": {"env": stage}},
                    "soak": "1h",
                    "rolloutStrategy": strategy,
                }
                for stage, (_, strategy) in stages.items()
            ],
        },
    }


def stage_plans(stages: Stages) -> dict[str, StagePlan]:
    return {
        stage: StagePlan(name=stage, strategy=strategy, members=tuple(cluster_names(stages, stage)))
        for stage, (_, strategy) in stages.items()
    }


def start_health(
    processes: ChaosProcesses, *, clusters: list[str], reporter_id: str, monitor_env: dict[str, str]
) -> None:
    """A simulated reporter for `clusters` (ready 0.1 s after asked) and the health monitor."""
    processes.start(
        "reporter",
        ["rollout_health", "reporter"],
        {
            "ROLLOUT_CLUSTERS": json.dumps(clusters),
            "ROLLOUT_REPORTER_ID": reporter_id,
            "ROLLOUT_PROBE_INTERVAL_S": "0.2",
            "ROLLOUT_HEARTBEAT_INTERVAL_S": "2",
            "ROLLOUT_SIMULATED__READY_AFTER_S": "0.1",
        },
    )
    processes.start(
        "monitor",
        ["rollout_health", "monitor"],
        {
            "ROLLOUT_STALENESS_LIMIT_S": "60",
            "ROLLOUT_CHECK_INTERVAL_S": "1",
            "ROLLOUT_RESTART_BACKOFF_MAX_S": "2",
            # readiness repeated every 10 s: a change applied before its upgrade result is repaired
            # well inside the time the tests allow for progress
            "ROLLOUT_REPUBLISH_INTERVAL_S": "10",
            **monitor_env,
        },
    )


def last_wait(processes: ChaosProcesses, *, tail_chars: int) -> str:
    """The planner's most recent non-empty wait_changed, from the last `tail_chars` of its log: why
    it is stuck."""
    for line in reversed(processes.log_tail("planner", tail_chars).splitlines()):
        if '"wait_changed"' in line and '"waits": []' not in line:
            with contextlib.suppress(ValueError, KeyError):
                waits = json.loads(line)["command"]["waits"]
                return "; ".join(w["message"] for w in waits)[:600]
    return "none logged"


async def publish_release(
    bootstrap: str, prefix: str, *, event_id: str, source: str, channel: str, targets: dict[str, str]
) -> None:
    """The release-target CloudEvent that starts the rollout of `channel`."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    await producer.start()
    try:
        body = {"eventId": event_id, "channel": channel, "targets": targets}
        await producer.send_and_wait(
            prefix + RELEASE_TARGETS.name,
            json.dumps(body).encode(),
            key=channel.encode(),
            headers=[
                ("ce_specversion", b"1.0"),
                ("ce_id", event_id.encode()),
                ("ce_source", source.encode()),
                ("ce_type", b"io.rollout.release_target.v1"),
                ("content-type", b"application/json"),
            ],
        )
    finally:
        await producer.stop()


async def read_topic(bootstrap: str, prefix: str, topic: TopicDef) -> list[Rec]:
    """Every record of the topic up to its end offsets now."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(prefix + topic.name, p) for p in range(topic.partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        records: list[Rec] = []

        async def behind() -> bool:
            return any([await consumer.position(tp) < ends[tp] for tp in tps])

        async with asyncio.timeout(60):
            while await behind():
                for batch in (await consumer.getmany(timeout_ms=500)).values():
                    records.extend(
                        decode(r.topic, r.partition, r.offset, r.timestamp, r.headers, r.value)
                        for r in batch
                        if r.offset < ends[TopicPartition(r.topic, r.partition)]
                    )
        return records
    finally:
        await consumer.stop()


async def group_lag(bootstrap: str, prefix: str, group: str, topics: tuple[TopicDef, ...]) -> dict[str, int]:
    """Per topic-partition with records, end offset minus the group's committed offset."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await admin.start()
    await consumer.start()
    try:
        committed = await admin.list_consumer_group_offsets(group)
        tps = [TopicPartition(prefix + t.name, p) for t in topics for p in range(t.partitions)]
        ends = await consumer.end_offsets(tps)
        lag = {}
        for tp in tps:
            meta = committed.get(tp)
            behind = ends[tp] - (meta.offset if meta is not None and meta.offset >= 0 else 0)
            if behind:
                lag[f"{tp.topic}[{tp.partition}]"] = behind
        return lag
    finally:
        await consumer.stop()
        await admin.close()
