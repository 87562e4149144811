"""Every topic the health monitor works on, faust's own included, has the replication and
`min.insync.replicas` the settings ask for on a three-broker cluster (BUS-3, BUS-6: a record the
monitor was told is written survives the loss of a broker).

faust creates its table's changelog and its leader topic with its replication factor only, so they
came out with the broker's `min.insync.replicas` of 1; the supervisor now creates them first.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient  # type: ignore[import-untyped]
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType  # type: ignore[import-untyped]
from monitor_group import group_has, stop_workers

from rollout_common.topics.catalog import DEAD_LETTER, HEARTBEATS, READINESS
from rollout_devenv import KafkaCluster

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def replication_of(bootstrap: str, topics: list[str]) -> dict[str, tuple[int, str | None]]:
    """Per topic, read back from the cluster: the fewest replicas of a partition, and its
    min.insync.replicas."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        described = await admin.describe_topics(topics)
        responses = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name, {"min.insync.replicas": None}) for name in topics]
        )
    finally:
        await admin.close()
    replicas = {t["topic"]: min(len(p["replicas"]) for p in t["partitions"]) for t in described}
    min_isr: dict[str, str | None] = {}
    for response in responses:
        for _code, _message, _kind, name, entries in response.resources:
            min_isr[name] = next((e[1] for e in entries if e[0] == "min.insync.replicas"), None)
    return {name: (replicas[name], min_isr[name]) for name in topics}


def start_monitor(bootstrap: str, prefix: str, tmp_path: Path) -> subprocess.Popen[bytes]:
    """The monitor (supervisor and faust worker) with the production settings of a three-broker cluster."""
    env = {
        **os.environ,
        "ROLLOUT_KAFKA_BOOTSTRAP": bootstrap,
        "ROLLOUT_KAFKA_REPLICATION_FACTOR": "3",
        "ROLLOUT_KAFKA_MIN_INSYNC_REPLICAS": "2",
        "ROLLOUT_TOPIC_PREFIX": prefix,
        "ROLLOUT_DATA_DIR": str(tmp_path / "monitor-data"),
        "ROLLOUT_METRICS_PORT": "0",
    }
    with (tmp_path / "monitor.log").open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "rollout_health", "monitor"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


async def test_the_monitor_s_topics_and_faust_s_own_have_replication_3_and_min_insync_2(
    kafka_cluster: KafkaCluster, topic_prefix: str, tmp_path: Path
) -> None:
    prefix = f"{topic_prefix}."
    monitor = start_monitor(kafka_cluster.bootstrap, prefix, tmp_path)
    try:
        # faust has declared its topics once its worker is a member of a stable group.
        await group_has(kafka_cluster.bootstrap, f"{prefix}rollout-health", 1, timeout_s=120)
        topics = [prefix + t.name for t in (HEARTBEATS, READINESS, DEAD_LETTER)]
        topics += [f"{prefix}rollout-health-cluster-health-changelog", f"{prefix}rollout-health-__assignor-__leader"]
        found = await replication_of(kafka_cluster.bootstrap, topics)
    finally:
        stop_workers([monitor])
    assert found == {name: (3, "2") for name in topics}, f"monitor log in {tmp_path}"
