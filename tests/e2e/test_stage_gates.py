"""Stage gates end to end (CHK-1, CHK-2): the whole system as processes on the real broker, Redis and
Prometheus, with the health service's check runner (`python -m rollout_health checks`) asking the
session's Prometheus, which scrapes a gauge this test sets.

- CHK-2: a metric goes bad in the middle of a stage: the rollout halts there with CHECK_FAILED (no
  batch handed out there after the halt, no driver started on a cluster not handed out before it,
  nothing qualified); the metric recovers, an operator resumes, the rollout completes.
- CHK-2: Prometheus stops in the middle of a soak: the results go inconclusive, then the rollout
  halts with CHECK_INCONCLUSIVE.
- CHK-1: an approval published by a pipeline's own Kafka producer (no CLI) opens the gate.

The planner runs at time scale 1 (the check runner's clock is the planner's: a result counts only
when observed after its series started), so the soaks and the checks' intervals are seconds.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from e2e_system import (
    Message,
    Pace,
    apply_fleet,
    publish_release,
    read_until,
    settled,
    start_system,
    wait_for_fleet,
)
from prometheus_service import Series
from service_processes import ServiceProcesses
from topic_reader import read_to_end

from rollout_common.topics.catalog import CHECK_RESULTS, OPERATOR_COMMANDS, PROGRESS, STAGE_ADVANCE, UPGRADE_RESULTS
from rollout_devenv import PrometheusServer

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

OLD = "1.30.5-gke.1000"
NEW = "1.31.13-gke.1023000"
PACE = Pace(time_scale=1.0, upgrade_s=0.5, max_concurrent=5, ready_after_s=0.2)
# For the halt mid-stage: upgrades slow enough that a metric gone bad after prod's first batch
# halts the stage before its last cluster is handed out, even on a loaded machine where the
# value's way through a scrape, the check's interval and the bus takes seconds (at 0.5 s an
# upgrade all four were out first once).
SLOW_PACE = Pace(time_scale=1.0, upgrade_s=2.0, max_concurrent=5, ready_after_s=0.2)
WAIT_S = 60.0


def fleet(name: str, *, stages: dict[str, int], gates: dict[str, dict[str, Any]], soak: str = "1s") -> dict[str, Any]:
    """`stages`: name -> clusters (`<stage>-NN`, labelled env: <stage>), upgraded one at a time;
    `gates`: a stage's extra fields (approval, checks)."""
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
                | gates.get(stage, {})
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
    document = fleet("gate", stages=stages, gates={"prod": {"approval": {"before": True}}})
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
    # everything the planner had to decide so far is decided: a batch of prod would be on the topic
    await settled(kafka_bootstrap, prefix)
    everything = await read_to_end(kafka_bootstrap, prefix + STAGE_ADVANCE.name, partitions=STAGE_ADVANCE.partitions)
    assert _clusters_in(everything, "canary") == {"canary-01"}
    assert _clusters_in(everything, "prod") == set()

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


def start_check_runner(services: ServiceProcesses, *, prefix: str, prometheus_url: str) -> None:
    """The health service's check runner, reading the sequence from the planner's Redis namespace."""
    services.start(
        "checks",
        ["rollout_health", "checks"],
        {
            "ROLLOUT_REDIS_NAMESPACE": prefix,
            "ROLLOUT_CHECKS__PROMETHEUS_URL": prometheus_url,
            "ROLLOUT_CHECKS__TIMEOUT_S": "2",
            "ROLLOUT_IDLE_POLL_S": "0.2",
        },
    )


def error_check(query: str, **fields: Any) -> dict[str, Any]:
    return {"name": "errors", "query": query, "successCondition": "result < 0.01", "interval": 1} | fields


def halted(records: list[Message], stage: str, reason: str) -> list[tuple[str, str, str]]:
    return [t for t in transitions(records, stage) if t[1] == "PAUSED" and t[2].startswith(reason)]


async def upgrades_started(
    kafka_bootstrap: str, prefix: str, stage: str, handed: dict[str, set[str]]
) -> dict[str, set[str]]:
    """track -> the stage's clusters whose driver started (the executors' `started` results), read
    once every upgrade handed out has finished (running upgrades finish after a halt)."""
    wanted = {(cluster, track) for track, clusters in handed.items() for cluster in clusters}

    def all_finished(records: list[Message]) -> bool:
        ended = {(b["cluster"], b["track"]) for b in bodies(records) if b["outcome"] in ("succeeded", "failed")}
        return wanted <= ended

    records = await read_until(
        kafka_bootstrap, prefix + UPGRADE_RESULTS.name, UPGRADE_RESULTS.partitions, all_finished, timeout_s=WAIT_S
    )
    started: dict[str, set[str]] = {}
    for body in bodies(records):
        if body["outcome"] == "started" and body["cluster"].startswith(f"{stage}-"):
            started.setdefault(body["track"], set()).add(body["cluster"])
    return started


def advances_by_track(records: list[Message], stage: str) -> dict[str, set[str]]:
    handed: dict[str, set[str]] = {}
    for body in bodies(records):
        if body["kind"] == "stage_advance" and body["stage"] == stage:
            handed.setdefault(body["track"], set()).update(body["clusters"])
    return handed


async def test_chk2_a_metric_gone_bad_mid_stage_halts_it_with_check_failed_then_a_resume_completes_it(
    tmp_path: Any, kafka_bootstrap: str, redis_url: str, prefix: str, services: ServiceProcesses, series: Series
) -> None:
    """CHK-2 (progress check, failureLimit 0), OPS-1: once prod's first batch is out the error rate
    goes to 0.2; the first failed result halts prod (PAUSED, CHECK_FAILED, naming check, value and
    condition). Audit after the halt: the upgrades running finish, no batch of prod is handed out
    and no driver starts on another prod cluster, nothing of prod soaks or completes. The rate
    recovers, a resume (a plain producer's command) is acknowledged and prod completes."""
    stages = {"canary": 1, "prod": 4}
    series.set(0.001)
    series.await_visible(0.001)
    prod = {"checks": [error_check(series.query, phases=["progress"])]}
    document = fleet("guarded", stages=stages, gates={"prod": prod})
    document["sequence"]["prometheusUrl"] = series.url
    apply_fleet(document, tmp_path=tmp_path, prefix=prefix, kafka_bootstrap=kafka_bootstrap, redis_url=redis_url)
    start_system(services, prefix=prefix, clusters=clusters_of(stages), pace=SLOW_PACE)
    start_check_runner(services, prefix=prefix, prometheus_url="http://127.0.0.1:1")
    await wait_for_fleet(redis_url, prefix, services, clusters=5)
    await publish_release(kafka_bootstrap, prefix, event_id="rel-guarded", targets={"1.30": NEW})

    await handed_out(kafka_bootstrap, prefix, "prod", at_least=1)
    series.set(0.2)
    records = await progress_until(
        kafka_bootstrap, prefix, services, lambda r: bool(halted(r, "prod", "halted by a failing metric check"))
    )
    halts = halted(records, "prod", "halted by a failing metric check")
    assert halts[0][2].startswith("halted by a failing metric check: check errors: failed with 0.2 at "), halts
    assert halts[0][2].endswith("(successCondition result < 0.01); 1 failed in a row, failureLimit 0 (CHK-2)")

    # The audit, once the upgrades running at the halt have finished and everything they led to is
    # on the topics: nothing of prod handed out or moved on after the halt, and the drivers started
    # on exactly the clusters handed out before it.
    await settled(kafka_bootstrap, prefix)
    handed = advances_by_track(records, "prod")
    started = await upgrades_started(kafka_bootstrap, prefix, "prod", handed)
    await settled(kafka_bootstrap, prefix)
    records = await progress_until(kafka_bootstrap, prefix, services, lambda r: bool(halted(r, "prod", "halted")))
    halt_at = next(
        i
        for i, b in enumerate(bodies(records))
        if b["kind"] == "stage_transition" and b["stage"] == "prod" and b["state"] == "PAUSED"
    )
    after_halt = records[halt_at:]
    assert advances_by_track(after_halt, "prod") == {}, "a batch of prod went out after the halt"
    assert {s for _, s, _ in transitions(after_halt, "prod")} == {"PAUSED"}, "prod moved on while halted"
    assert advances_by_track(records, "prod") == handed
    assert await upgrades_started(kafka_bootstrap, prefix, "prod", handed) == started == handed
    assert len(handed["controlPlane"]) < 4, f"the halt came after every cluster was handed out: {handed}"

    series.set(0.001)
    series.await_visible(0.001)
    command_id = f"resume-{uuid.uuid4().hex[:8]}"
    await publish_as_pipeline(
        kafka_bootstrap,
        prefix,
        {"kind": "operator_command", "commandId": command_id, "action": "resume", "rolloutId": "guarded-1"},
    )
    records = await progress_until(kafka_bootstrap, prefix, services, lambda r: complete(r, "prod"))
    acks = [b for b in bodies(records) if b["kind"] == "command_ack" and b["commandId"] == command_id]
    assert [ack["accepted"] for ack in acks] == [True]
    assert await handed_out(kafka_bootstrap, prefix, "prod", at_least=4) == {"prod-01", "prod-02", "prod-03", "prod-04"}


async def test_chk2_prometheus_stopped_mid_soak_gives_inconclusive_results_then_halts_with_check_inconclusive(
    tmp_path: Any,
    kafka_bootstrap: str,
    redis_url: str,
    prefix: str,
    services: ServiceProcesses,
    series: Series,
    prometheus_server: PrometheusServer,
) -> None:
    """CHK-2 (soak check, inconclusiveLimit 1, the runner's default Prometheus): canary soaks 60 s;
    Prometheus stops once a soak check passed; the next results are inconclusive (unreachable) and
    the second halts canary with CHECK_INCONCLUSIVE before its soak could end; prod never starts."""
    stages = {"canary": 1, "prod": 1}
    series.set(0.001)
    series.await_visible(0.001)
    canary = {"checks": [error_check(series.query, phases=["soak"], inconclusiveLimit=1)]}
    document = fleet("soaked", stages=stages, gates={"canary": canary}, soak="60s")
    apply_fleet(document, tmp_path=tmp_path, prefix=prefix, kafka_bootstrap=kafka_bootstrap, redis_url=redis_url)
    start_system(services, prefix=prefix, clusters=clusters_of(stages), pace=PACE)
    start_check_runner(services, prefix=prefix, prometheus_url=prometheus_server.url)
    await wait_for_fleet(redis_url, prefix, services, clusters=2)
    await publish_release(kafka_bootstrap, prefix, event_id="rel-soaked", targets={"1.30": NEW})

    def passed(records: list[Message]) -> bool:
        return any(b["outcome"] == "passed" for b in bodies(records))

    await read_until(kafka_bootstrap, prefix + CHECK_RESULTS.name, CHECK_RESULTS.partitions, passed, timeout_s=WAIT_S)
    prometheus_server.stop()
    records = await progress_until(
        kafka_bootstrap, prefix, services, lambda r: bool(halted(r, "canary", "halted by a metric check without"))
    )
    halt = halted(records, "canary", "halted by a metric check without")[0]
    assert halt[2].startswith(
        "halted by a metric check without a conclusive result: check errors: inconclusive with no value at "
    )
    assert f"{prometheus_server.url} unreachable: ClientConnectorError: " in halt[2]
    assert halt[2].endswith("; 2 inconclusive in a row, inconclusiveLimit 1 (CHK-2)")
    canary_states = [s for _, s, _ in transitions(records, "canary")]
    assert "SOAKING" in canary_states and "COMPLETE" not in canary_states
    assert transitions(records, "prod") == [] or {s for _, s, _ in transitions(records, "prod")} <= {"PENDING"}

    def two_inconclusive(records: list[Message]) -> bool:
        return [b["outcome"] for b in bodies(records)].count("inconclusive") >= 2

    topic = prefix + CHECK_RESULTS.name
    results = bodies(
        await read_until(kafka_bootstrap, topic, CHECK_RESULTS.partitions, two_inconclusive, timeout_s=WAIT_S)
    )
    outcomes = [b["outcome"] for b in results]
    last_passed = max(i for i, o in enumerate(outcomes) if o == "passed")
    assert outcomes[last_passed + 1 : last_passed + 3] == ["inconclusive", "inconclusive"]
