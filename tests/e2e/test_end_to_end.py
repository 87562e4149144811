"""The whole system as separate processes on the real broker and Redis (BUS-1..6).

Planner, two executors, a health reporter and the health monitor run as `python -m ...`; the
fleet is applied with the CLI; a release target comes from an independent aiokafka producer;
an independent consumer of the progress topic must see every stage and track COMPLETE with the
versions the simulator predicts for the same scenario. Soaks pass through the planner's
`time_scale` (2 h of soak = 2 s), never by sleeping in the test.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from e2e_system import (
    Message,
    Pace,
    apply_fleet,
    publish_release,
    read_until,
    settled,
    staged_cluster_names,
    staged_fleet,
    start_system,
    wait_for_fleet,
)
from service_processes import ServiceProcesses
from topic_reader import completions

from rollout_common.topics.catalog import PROGRESS, STAGE_ADVANCE, UPGRADE_RESULTS
from rollout_planner.simulation.runner import simulate
from rollout_planner.simulation.scenario import Scenario

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

OLD = "1.30.5-gke.1000"
NEW = "1.31.13-gke.1023000"
STAGES = ("dev", "staging", "prod")
PER_STAGE = 20
TIME_SCALE = 3600.0  # engine seconds per wall second: each 2 h soak takes 2 s
COMPLETE_TIMEOUT_S = 120.0

PACE = Pace(time_scale=TIME_SCALE, upgrade_s=1.0, max_concurrent=5, ready_after_s=0.5)


def scenario_document() -> dict[str, Any]:
    fleet = staged_fleet(name="e2e", stages=STAGES, per_stage=PER_STAGE, version=OLD, soak="2h", max_new=5)
    return fleet | {"simulation": {"upgradeDuration": {"controlPlane": "10m", "nodes": "10m"}, "readyAfter": "1m"}}


def cluster_names() -> list[str]:
    return staged_cluster_names(STAGES, PER_STAGE)


def predicted_completions() -> dict[tuple[str, str], str]:
    """(stage, track) -> version, as the simulator decides it for the same fleet and release."""
    document = scenario_document() | {
        "events": [{"at": "0s", "releaseTarget": {"channel": "regular", "targets": {"1.30": NEW}, "id": "rel-e2e"}}]
    }
    report = simulate(Scenario.model_validate(document))
    return {(t["stage"], t["track"]): t["version"] for t in report.transitions if t["state"] == "COMPLETE"}


def every_track_complete(records: list[Message]) -> bool:
    return len(completions(records)) == len(STAGES) * 2


async def wait_for_completion(
    kafka_bootstrap: str,
    prefix: str,
    services: ServiceProcesses,
    on_poll: Callable[[list[Message]], None] | None = None,
) -> dict[tuple[str, str], str]:
    def watch(records: list[Message]) -> None:
        crashed = {name: code for name, code in services.exited().items() if code != -9}
        assert not crashed, f"exited: {crashed}\n" + "\n".join(services.log_tail(n) for n in crashed)
        if on_poll is not None:
            on_poll(records)

    try:
        records = await read_until(
            kafka_bootstrap,
            prefix + PROGRESS.name,
            PROGRESS.partitions,
            every_track_complete,
            timeout_s=COMPLETE_TIMEOUT_S,
            on_poll=watch,
        )
    except TimeoutError:
        pytest.fail(f"not complete in {COMPLETE_TIMEOUT_S}s; planner log:\n{services.log_tail('planner')}")
    return completions(records)


async def topic_bodies(
    kafka_bootstrap: str, prefix: str, topic: str, partitions: int, done: Callable[[list[Message]], bool]
) -> list[tuple[str, dict[str, Any]]]:
    """(ce_id, body) of every record, once `done` holds and the services have handled all their
    input since, so that a wrongly repeated message would show up too."""
    await read_until(kafka_bootstrap, prefix + topic, partitions, done, timeout_s=60)
    await settled(kafka_bootstrap, prefix)
    records = await read_until(kafka_bootstrap, prefix + topic, partitions, done, timeout_s=60)
    return [(dict(r.headers)["ce_id"].decode(), json.loads(r.value)) for r in records]


async def upgrade_results(kafka_bootstrap: str, prefix: str) -> list[tuple[str, dict[str, Any]]]:
    expected = len(cluster_names()) * 2

    def all_finished(records: list[Message]) -> bool:
        return sum(json.loads(r.value)["outcome"] == "succeeded" for r in records) >= expected

    return await topic_bodies(kafka_bootstrap, prefix, UPGRADE_RESULTS.name, UPGRADE_RESULTS.partitions, all_finished)


async def stage_advances(kafka_bootstrap: str, prefix: str) -> list[tuple[str, dict[str, Any]]]:
    expected = len(cluster_names()) * 2

    def all_handed_out(records: list[Message]) -> bool:
        return sum(len(json.loads(r.value)["clusters"]) for r in records) >= expected

    return await topic_bodies(kafka_bootstrap, prefix, STAGE_ADVANCE.name, STAGE_ADVANCE.partitions, all_handed_out)


def wanted() -> set[tuple[str, str]]:
    return {(name, track) for name in cluster_names() for track in ("controlPlane", "nodes")}


def assert_each_cluster_decided_once(advances: list[tuple[str, dict[str, Any]]]) -> None:
    """The planner put every cluster and track in exactly one batch (a batch re-published after a
    restart keeps its id, so it counts once)."""
    commands: dict[tuple[str, str], set[str]] = {}
    for ce_id, body in advances:
        for cluster in body["clusters"]:
            commands.setdefault((cluster, body["track"]), set()).add(ce_id)
    assert set(commands) == wanted()
    assert {key: ids for key, ids in commands.items() if len(ids) > 1} == {}


def assert_each_cluster_upgraded_once(results: list[tuple[str, dict[str, Any]]], *, clean: bool) -> None:
    """One success per cluster and track, none missing. An executor that finds a result already
    recorded re-publishes it under the same event id, so successes count by id. In a clean run
    (no executor killed) the driver also started exactly once per cluster and track."""
    succeeded: dict[tuple[str, str], set[str]] = {}
    started: Counter[tuple[str, str]] = Counter()
    for ce_id, body in results:
        key = (body["cluster"], body["track"])
        if body["outcome"] == "succeeded":
            succeeded.setdefault(key, set()).add(ce_id)
        elif body["outcome"] == "started":
            started[key] += 1
    assert set(succeeded) == wanted(), f"missing: {sorted(wanted() - set(succeeded))[:10]}"
    assert {key: ids for key, ids in succeeded.items() if len(ids) > 1} == {}, "upgraded more than once"
    assert all(body["version"] == NEW for _, body in results)
    if clean:
        assert {key: n for key, n in started.items() if n != 1} == {}


async def test_a_release_rolls_through_three_stages_of_sixty_clusters(
    tmp_path: Path, kafka_bootstrap: str, redis_url: str, prefix: str, services: ServiceProcesses
) -> None:
    apply_fleet(
        scenario_document(), tmp_path=tmp_path, prefix=prefix, kafka_bootstrap=kafka_bootstrap, redis_url=redis_url
    )
    start_system(services, prefix=prefix, clusters=cluster_names(), pace=PACE)
    await wait_for_fleet(redis_url, prefix, services, clusters=len(cluster_names()))
    await publish_release(kafka_bootstrap, prefix, event_id="rel-e2e", targets={"1.30": NEW})

    seen = await wait_for_completion(kafka_bootstrap, prefix, services)

    assert seen == predicted_completions()
    assert set(seen.values()) == {NEW}
    assert_each_cluster_decided_once(await stage_advances(kafka_bootstrap, prefix))
    assert_each_cluster_upgraded_once(await upgrade_results(kafka_bootstrap, prefix), clean=True)


async def test_an_executor_killed_mid_batch_loses_no_cluster_and_repeats_none(
    tmp_path: Path, kafka_bootstrap: str, redis_url: str, prefix: str, services: ServiceProcesses
) -> None:
    apply_fleet(
        scenario_document(), tmp_path=tmp_path, prefix=prefix, kafka_bootstrap=kafka_bootstrap, redis_url=redis_url
    )
    start_system(services, prefix=prefix, clusters=cluster_names(), pace=PACE)
    await wait_for_fleet(redis_url, prefix, services, clusters=len(cluster_names()))
    await publish_release(kafka_bootstrap, prefix, event_id="rel-e2e", targets={"1.30": NEW})

    started_seen: list[int] = []

    async def kill_mid_batch() -> None:
        # Once upgrades are running, at least one of them on executor-0's hands.
        def some_started(records: list[Message]) -> bool:
            return sum(json.loads(r.value)["outcome"] == "started" for r in records) >= 3

        records = await read_until(
            kafka_bootstrap, prefix + UPGRADE_RESULTS.name, UPGRADE_RESULTS.partitions, some_started, timeout_s=60
        )
        started_seen.append(len(records))
        services.kill("executor-0")

    killer = asyncio.create_task(kill_mid_batch())
    seen = await wait_for_completion(kafka_bootstrap, prefix, services)
    await killer

    assert started_seen, "the executor was never killed"
    assert seen == predicted_completions()
    assert_each_cluster_decided_once(await stage_advances(kafka_bootstrap, prefix))
    assert_each_cluster_upgraded_once(await upgrade_results(kafka_bootstrap, prefix), clean=False)
