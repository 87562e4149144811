"""Stage gates end to end (CHK-1): the whole system as processes on the real broker and Redis.

- CHK-1: an approval published by a pipeline's own Kafka producer (no CLI) opens the gate.

The planner runs at time scale 1, so the soaks are a few seconds.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from e2e_system import Message, Pace, apply_fleet, publish_release, read_until, start_system, wait_for_fleet
from service_processes import ServiceProcesses

from rollout_common.topics.catalog import OPERATOR_COMMANDS, PROGRESS, STAGE_ADVANCE

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

OLD = "1.30.5-gke.1000"
NEW = "1.31.13-gke.1023000"
PACE = Pace(time_scale=1.0, upgrade_s=0.5, max_concurrent=5, ready_after_s=0.2)
WAIT_S = 60.0


def fleet(name: str, *, stages: dict[str, int], prod: dict[str, Any], soak: str = "1s") -> dict[str, Any]:
    """`stages`: name -> clusters (`<stage>-NN`, labelled env: <stage>), upgraded one at a time; the
    last stage gets the `prod` fields (its gates)."""
    last = list(stages)[-1]
    return {
        "name": name,
        "generate": [
            {"count": count, "name": f"{stage}-{{i:02d}}", "labels": {"env": stage}, "version": OLD}
            for stage, count in stages.items()
        ],
        "sequence": {
            "name": name,
            "channel": "regular",
            "stages": [
                {
                    "name": stage,
                    "clusterSelector": {"matchLabels": {"env": stage}},
                    "soak": soak,
                    "rolloutStrategy": {"maxNew": 1, "maxUnavailable": "50%"},
                }
                | (prod if stage == last else {})
                for stage in stages
            ],
        },
    }


def clusters_of(stages: dict[str, int]) -> list[str]:
    return [f"{stage}-{i:02d}" for stage, count in stages.items() for i in range(1, count + 1)]


def bodies(records: list[Message]) -> list[dict[str, Any]]:
    return [json.loads(record.value) for record in records]


def transitions(records: list[Message], stage: str) -> list[tuple[str, str, str]]:
    """(track, state, reason) of the stage's transitions, in order."""
    return [
        (body["track"], body["state"], body["reason"])
        for body in bodies(records)
        if body["kind"] == "stage_transition" and body["stage"] == stage
    ]


def complete(records: list[Message], stage: str) -> bool:
    return {track for track, state, _ in transitions(records, stage) if state == "COMPLETE"} == {
        "controlPlane",
        "nodes",
    }


async def progress_until(kafka_bootstrap: str, prefix: str, services: ServiceProcesses, done: Any) -> list[Message]:
    def alive(_: list[Message]) -> None:
        assert not services.exited(), f"exited: {services.exited()}\n{services.log_tail('planner')}"

    try:
        return await read_until(
            kafka_bootstrap, prefix + PROGRESS.name, PROGRESS.partitions, done, timeout_s=WAIT_S, on_poll=alive
        )
    except TimeoutError:
        pytest.fail(
            f"the progress topic never showed what was awaited in {WAIT_S:.0f} s; planner log:\n"
            f"{services.log_tail('planner')}\nchecks log:\n{services.log_tail('checks')}"
        )


async def publish_as_pipeline(kafka_bootstrap: str, prefix: str, command: dict[str, Any]) -> None:
    """A pipeline's own producer: the documented JSON body and CloudEvents headers, no project code."""
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        await producer.send_and_wait(
            prefix + OPERATOR_COMMANDS.name,
            json.dumps(command).encode(),
            key=command["rolloutId"].encode(),
            headers=[
                ("ce_specversion", b"1.0"),
                ("ce_id", command["commandId"].encode()),
                ("ce_source", b"ci-pipeline"),
                ("ce_type", b"io.rollout.operator_command.v1"),
                ("content-type", b"application/json"),
            ],
        )
    finally:
        await producer.stop()


async def handed_out(kafka_bootstrap: str, prefix: str, stage: str, *, at_least: int) -> set[str]:
    """The stage's clusters in the batches on the stage-advance topic (once `at_least` are there)."""

    def enough(records: list[Message]) -> bool:
        return len(_clusters_in(records, stage)) >= at_least

    records = await read_until(
        kafka_bootstrap, prefix + STAGE_ADVANCE.name, STAGE_ADVANCE.partitions, enough, timeout_s=WAIT_S
    )
    return _clusters_in(records, stage)


def _clusters_in(records: list[Message], stage: str) -> set[str]:
    return {cluster for body in bodies(records) if body["stage"] == stage for cluster in body["clusters"]}


async def test_chk1_an_approval_from_a_pipelines_own_producer_opens_the_gate(
    tmp_path: Any, kafka_bootstrap: str, redis_url: str, prefix: str, services: ServiceProcesses
) -> None:
    """CHK-1, OPS-3: prod waits AWAITING_APPROVAL with nothing handed out; the approve command,
    published with plain aiokafka as a CI pipeline would, is acknowledged and prod completes."""
    stages = {"canary": 1, "prod": 2}
    document = fleet("gate", stages=stages, prod={"approval": {"before": True}})
    apply_fleet(document, tmp_path=tmp_path, prefix=prefix, kafka_bootstrap=kafka_bootstrap, redis_url=redis_url)
    start_system(services, prefix=prefix, clusters=clusters_of(stages), pace=PACE)
    await wait_for_fleet(redis_url, prefix, services, clusters=3)
    await publish_release(kafka_bootstrap, prefix, event_id="rel-gate", targets={"1.30": NEW})

    def awaiting(records: list[Message]) -> bool:
        return {(t, s) for t, s, _ in transitions(records, "prod")} >= {
            ("controlPlane", "AWAITING_APPROVAL"),
            ("nodes", "AWAITING_APPROVAL"),
        }

    records = await progress_until(kafka_bootstrap, prefix, services, awaiting)
    assert complete(records, "canary")
    assert [state for _, state, _ in transitions(records, "prod")] == ["AWAITING_APPROVAL", "AWAITING_APPROVAL"]
    assert await handed_out(kafka_bootstrap, prefix, "prod", at_least=0) == set()

    command_id = f"pipeline-{uuid.uuid4().hex[:8]}"
    await publish_as_pipeline(
        kafka_bootstrap,
        prefix,
        {
            "kind": "operator_command",
            "commandId": command_id,
            "action": "approve",
            "rolloutId": "gate-1",
            "stage": "prod",
            "gate": "before",
            "issuedBy": "ci-pipeline",
            "comment": "canary error budget met",
        },
    )

    records = await progress_until(kafka_bootstrap, prefix, services, lambda r: complete(r, "prod"))
    acks = [body for body in bodies(records) if body["kind"] == "command_ack" and body["commandId"] == command_id]
    assert [ack["accepted"] for ack in acks] == [True]
    states = [state for _, state, _ in transitions(records, "prod")]
    assert states[:2] == ["AWAITING_APPROVAL", "AWAITING_APPROVAL"]
    assert "IN_PROGRESS" in states[2:]
    assert await handed_out(kafka_bootstrap, prefix, "prod", at_least=2) == {"prod-01", "prod-02"}
