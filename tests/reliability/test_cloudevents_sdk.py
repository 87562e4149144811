"""CloudEvents' own Python SDK on both sides of the wire: events it produces in binary and in structured
mode are accepted on every input topic (BUS-2), and what the planner publishes reads back with the
SDK's Kafka binding."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from canary_prod import NEW, OLD, START, running_canary_prod_planner
from cloudevents.core.bindings import kafka as ce_kafka
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent
from pydantic import BaseModel
from topic_reader import Message, read_topic

from rollout_adapters.kafka_bus import KafkaBus
from rollout_common import envelope
from rollout_common.commands import StageAdvance
from rollout_common.events import InventoryChange, OperatorCommand, Readiness, ReleaseTarget, UpgradeResult
from rollout_common.fleet import Cluster
from rollout_common.heartbeat import Heartbeat
from rollout_common.status import Track
from rollout_common.topics import ALL
from rollout_common.topics.catalog import (
    HEARTBEATS,
    INVENTORY,
    OPERATOR_COMMANDS,
    PROGRESS,
    READINESS,
    RELEASE_TARGETS,
    STAGE_ADVANCE,
    UPGRADE_RESULTS,
    TopicDef,
)

# One event per input topic of every service, as a producer using the SDK would write it.
SAMPLES: list[tuple[TopicDef, BaseModel]] = [
    (RELEASE_TARGETS, ReleaseTarget(event_id="rel-1", channel="regular", targets={"1.30": NEW})),
    (OPERATOR_COMMANDS, OperatorCommand(command_id="cmd-1", action="pause", all_rollouts=True)),
    (READINESS, Readiness(cluster="can-1", ready=True, observed_at=START)),
    (INVENTORY, InventoryChange(action="upsert", cluster=Cluster(name="can-3", labels={"env": "canary"}, version=OLD))),
    (
        UPGRADE_RESULTS,
        UpgradeResult(command_id="c/1", cluster="can-1", track=Track.NODES, version=NEW, outcome="succeeded"),
    ),
    (
        STAGE_ADVANCE,
        StageAdvance(
            command_id="c/1",
            rollout_id="r1",
            stage="canary",
            track=Track.NODES,
            partition="All",
            version=NEW,
            clusters=("can-1",),
        ),
    ),
    (HEARTBEATS, Heartbeat(cluster="can-1", ready=True, observed_at=START)),
]


def _sdk_event(model: BaseModel, event_id: str) -> CloudEvent:
    """The model as the SDK's CloudEvent: the type our catalog names, the body as JSON data."""
    return CloudEvent(
        attributes={
            "type": envelope.event_type(model),
            "source": "/sdk-producer",
            "id": event_id,
            "datacontenttype": "application/json",
            "subject": "sdk",
        },
        data=json.loads(model.model_dump_json(by_alias=True)),
    )


@pytest.mark.parametrize("mode", ["binary", "structured"])
@pytest.mark.parametrize(("topic", "model"), SAMPLES, ids=[t.name for t, _ in SAMPLES])
def test_every_input_topic_reads_both_content_modes(mode: str, topic: TopicDef, model: BaseModel) -> None:
    convert = ce_kafka.to_binary if mode == "binary" else ce_kafka.to_structured
    message = convert(_sdk_event(model, "e-1"), JSONFormat())
    meta, decoded = envelope.decode(message.value, message.headers, topic.models)
    assert decoded == model
    assert (meta.id, meta.source, meta.type, meta.subject) == (
        "e-1",
        "/sdk-producer",
        envelope.event_type(model),
        "sdk",
    )


def _sdk_events(records: list[Message]) -> list[Any]:
    """The progress records read through the SDK's Kafka binding (it detects the mode)."""
    return [
        ce_kafka.from_kafka(
            ce_kafka.KafkaMessage(headers={k: v for k, v in r.headers}, key=r.key, value=r.value), JSONFormat()
        )
        for r in records
    ]


def _started(events: list[Any]) -> set[str]:
    return {
        str(e.get_data()["reason"])
        for e in events
        if e.get_type() == "io.rollout.rollout_transition.v1" and e.get_data().get("state") == "RUNNING"
    }


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_the_planner_accepts_sdk_events_in_both_modes_and_its_progress_reads_with_the_sdk(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str
) -> None:
    prefix = topic_prefix + "."
    admin = KafkaBus(kafka_bootstrap, client_id=f"{prefix}admin")
    await admin.ensure_topics([t.spec(prefix) for t in ALL])
    await admin.close()
    binary = ce_kafka.to_binary(
        _sdk_event(ReleaseTarget(event_id="rel-binary", channel="regular", targets={"1.30": NEW}), "b-1"), JSONFormat()
    )
    structured = ce_kafka.to_structured(
        _sdk_event(ReleaseTarget(event_id="rel-structured", channel="regular", targets={"1.30": NEW}), "s-1"),
        JSONFormat(),
    )
    async with running_canary_prod_planner(kafka_bootstrap, redis_url, prefix, name="sdk"):
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=True)
        await producer.start()
        try:
            for message in (binary, structured):
                await producer.send_and_wait(
                    prefix + RELEASE_TARGETS.name, message.value, key=b"regular", headers=list(message.headers.items())
                )
        finally:
            await producer.stop()
        wanted = {"started by event rel-binary", "started by event rel-structured"}

        def _seen(events: list[Any]) -> bool:
            """Both rollouts started, and the canary batch handed out (progress spreads over partitions)."""
            return wanted <= _started(events) and any(e.get_type() == "io.rollout.stage_advance.v1" for e in events)

        records = await read_topic(kafka_bootstrap, prefix + PROGRESS.name, until=lambda rs: _seen(_sdk_events(rs)))
    events = _sdk_events(records)
    assert wanted <= _started(events)
    assert all(e.get_source() == "rollout-planner" and e.get_specversion() == "1.0" for e in events)
    advances = [e for e in events if e.get_type() == "io.rollout.stage_advance.v1"]
    assert advances and all(e.get_data()["stage"] == "canary" for e in advances)
