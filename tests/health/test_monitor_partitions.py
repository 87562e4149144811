"""Partition counts are settings (issue 21): topics are created with them, and a monitor whose table
would not be co-partitioned with its heartbeats topic refuses to start, saying what to do."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from pydantic import ValidationError

from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.memory_bus import kafka_partition
from rollout_common.envelope import decode, encode
from rollout_common.events import Readiness
from rollout_common.heartbeat import Heartbeat
from rollout_common.ports import TopicSpec
from rollout_common.topics.catalog import DEAD_LETTER, HEARTBEATS, READINESS, STAGE_ADVANCE
from rollout_health.partition_check import changelog_topic
from rollout_health.settings import MonitorSettings


def test_partitions_come_from_settings_by_catalog_name_with_the_catalogs_defaults() -> None:
    settings = MonitorSettings(topic_prefix="p.", topic_partitions={"rollout.cluster-heartbeats": 12})
    assert settings.topic_spec(HEARTBEATS) == TopicSpec(
        name="p.rollout.cluster-heartbeats", partitions=12, retention_ms=HEARTBEATS.retention_ms
    )
    assert (settings.partitions(STAGE_ADVANCE), settings.partitions(READINESS)) == (16, 4)


def test_an_unknown_topic_name_or_a_count_out_of_range_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"unknown topic\(s\) \['rollout.heartbeats'\]"):
        MonitorSettings(topic_partitions={"rollout.heartbeats": 8})
    with pytest.raises(ValidationError, match=r"rollout\.cluster-heartbeats: 0 partitions; a topic has 1 to 4096"):
        MonitorSettings(topic_partitions={"rollout.cluster-heartbeats": 0})


def test_the_environment_sets_them_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROLLOUT_TOPIC_PARTITIONS", '{"rollout.stage-advance": 32}')
    assert MonitorSettings().partitions(STAGE_ADVANCE) == 32


def _monitor(kafka_bootstrap: str, prefix: str, tmp_path: Path, partitions: dict[str, int]) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "ROLLOUT_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "ROLLOUT_TOPIC_PREFIX": prefix,
        "ROLLOUT_DATA_DIR": str(tmp_path / "monitor-data"),
        "ROLLOUT_TOPIC_PARTITIONS": json.dumps(partitions),
        "ROLLOUT_METRICS_PORT": "0",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "rollout_health", "monitor"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_a_monitor_configured_for_more_heartbeat_partitions_than_the_topic_has_is_refused(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    """The topic exists with the catalog's 4; the settings say 6: the supervisor exits 1 at once (no
    restarts), naming both counts and the two ways out."""
    prefix = f"{topic_prefix}."
    bus = KafkaBus(kafka_bootstrap, client_id="test")
    try:
        await bus.ensure_topics([t.spec(prefix) for t in (HEARTBEATS, READINESS, DEAD_LETTER)])
    finally:
        await bus.close()
    process = _monitor(kafka_bootstrap, prefix, tmp_path, {HEARTBEATS.name: 6})
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 1, output
    topic = prefix + HEARTBEATS.name
    assert (
        f"topic {topic} has 4 partitions but the settings say 6: grow the topic (kafka-topics.sh --alter "
        f"--topic {topic} --partitions 6; see docs/operations.md, sizing) or set ROLLOUT_TOPIC_PARTITIONS to "
        "map it to 4 in every service of this deployment"
    ) in output
    assert "monitor worker started" not in output


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_a_changelog_with_other_partitions_than_the_heartbeats_is_refused(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    """The heartbeats topic grew to 6 while the table's changelog kept 4: rows would live on other
    workers than their clusters' heartbeats, so the monitor refuses and says to drop the changelog."""
    prefix = f"{topic_prefix}."
    changelog = changelog_topic(MonitorSettings(topic_prefix=prefix))
    bus = KafkaBus(kafka_bootstrap, client_id="test")
    try:
        await bus.ensure_topics([HEARTBEATS.spec(prefix, partitions=6), TopicSpec(name=changelog, partitions=4)])
    finally:
        await bus.close()
    process = _monitor(kafka_bootstrap, prefix, tmp_path, {HEARTBEATS.name: 6})
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 1, output
    assert (
        f"the monitor's table changelog {changelog} has 4 partitions but its heartbeats topic "
        f"{prefix}{HEARTBEATS.name} has 6: they must be equal. With every monitor worker stopped, delete the "
        f"changelog (kafka-topics.sh --delete --topic {changelog})"
    ) in output


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_the_monitor_creates_its_topics_and_table_with_the_configured_partitions(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    """Six heartbeat partitions from the settings: the topic and the table's changelog get six, and a
    heartbeat on partition 5 (which the catalog's four would not have) becomes readiness."""
    prefix = f"{topic_prefix}."
    process = _monitor(kafka_bootstrap, prefix, tmp_path, {HEARTBEATS.name: 6})
    name = next(f"c-{i}" for i in range(1000) if kafka_partition(f"c-{i}".encode(), 6) == 5)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=True)
    readiness = AIOKafkaConsumer(
        prefix + READINESS.name, bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest"
    )
    bus = KafkaBus(kafka_bootstrap, client_id="test")
    await producer.start()
    await readiness.start()
    try:
        async with asyncio.timeout(60):
            while True:  # no event to wait on: the monitor creates its topics at start
                if prefix + HEARTBEATS.name in await bus.partition_counts([prefix + HEARTBEATS.name]):
                    break
                await asyncio.sleep(0.2)
            found: list[Readiness] = []
            while not found:  # the worker may still be joining its group: beat until it answers
                now = time.time()
                value, headers = encode(
                    Heartbeat(cluster=name, ready=True, observed_at=now), event_id=f"{now}", source="test", at=now
                )
                sent = await producer.send_and_wait(
                    prefix + HEARTBEATS.name, value, key=name.encode(), headers=list(headers.items())
                )
                assert sent.partition == 5
                for batch in (await readiness.getmany(timeout_ms=1000)).values():
                    for message in batch:
                        _, change = decode(message.value or b"", dict(message.headers), READINESS.models)
                        assert isinstance(change, Readiness)
                        found.append(change)
            changelog = changelog_topic(MonitorSettings(topic_prefix=prefix))
            counts = await bus.partition_counts([prefix + HEARTBEATS.name, changelog])
        assert [(r.cluster, r.ready) for r in found] == [(name, True)]
        assert counts == {prefix + HEARTBEATS.name: 6, changelog: 6}
    finally:
        await bus.close()
        await producer.stop()
        await readiness.stop()
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
