"""Topics on a three-broker cluster get the replication the settings ask for, and a service that
finds its topics replicated less says so in one warning line at start (BUS-3, BUS-6: an
acknowledged record must survive the loss of a broker)."""

from __future__ import annotations

import logging

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from rollout_adapters.connections import kafka_bus
from rollout_common.connection_settings import ServiceSettings, load
from rollout_common.errors import InvalidInputError
from rollout_common.ports import TopicSpec
from rollout_devenv import KafkaCluster

pytestmark = pytest.mark.integration


async def test_topics_are_created_with_the_replication_the_settings_ask_and_a_shortfall_is_one_warning(
    kafka_cluster: KafkaCluster, topic_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    made_by_hand = f"{topic_prefix}-by-hand"
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_cluster.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(made_by_hand, num_partitions=2, replication_factor=1)])
    finally:
        await admin.close()
    settings = ServiceSettings(
        kafka_bootstrap=kafka_cluster.bootstrap, kafka_replication_factor=3, kafka_min_insync_replicas=2
    )
    bus = kafka_bus(settings, client_id="replication-test")
    try:
        fresh = f"{topic_prefix}-fresh"
        with caplog.at_level(logging.WARNING, logger="rollout_adapters.kafka_bus"):
            await bus.ensure_topics([TopicSpec(name=fresh, partitions=2)])
        assert _bus_warnings(caplog) == []
        assert await bus.replication_shortfall([fresh]) == []
        with caplog.at_level(logging.WARNING, logger="rollout_adapters.kafka_bus"):
            await bus.ensure_topics([TopicSpec(name=fresh, partitions=2), TopicSpec(name=made_by_hand, partitions=2)])
        assert _bus_warnings(caplog) == [
            "kafka: topics replicated below what the settings ask (replication factor 3, min.insync.replicas 2): "
            f"{made_by_hand}: 1 replicas, min.insync.replicas 1"
        ]
    finally:
        await bus.close()


def _bus_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What the bus itself warned: a client's own warnings (a metadata retry on a loaded machine, a
    close abandoned by an earlier test) are not the one line this test is about."""
    return [r.getMessage() for r in caplog.records if r.name == "rollout_adapters.kafka_bus"]


def test_min_insync_replicas_above_the_replication_factor_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROLLOUT_KAFKA_REPLICATION_FACTOR", "1")
    monkeypatch.setenv("ROLLOUT_KAFKA_MIN_INSYNC_REPLICAS", "2")
    with pytest.raises(InvalidInputError, match="kafka_min_insync_replicas may not exceed kafka_replication_factor"):
        load(ServiceSettings)
