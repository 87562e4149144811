"""The status screen: `rollout demo --status-at`, `rollout status` from Redis, the document and the metrics."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from rollout_adapters.redis_store import RedisStore
from rollout_cli.demo_scenario import builtin_scenario
from rollout_cli.demo_simulation import status_document
from rollout_cli.main import main
from rollout_planner.service.checkpoint import STATUS_KEY
from rollout_planner.service.metrics import PlannerMetrics
from rollout_planner.service.status_document import NAMES_CAP
from rollout_planner.simulation.runner import Simulator
from rollout_planner.simulation.scenario import Scenario


def _demo_at(at: float) -> Simulator:
    sim = Simulator(builtin_scenario())
    sim.start()
    while (t := sim.next_time()) is not None and t <= at:
        sim.step()
    return sim


def test_status_at_two_hours_names_the_gate_3_wait_with_its_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--status-at", "2h"]) == 0
    screen = capsys.readouterr().out
    assert "simulated clock 2026-01-05 10:00 UTC (T+2h)" in screen
    wait = next(line for line in screen.splitlines() if "GATE-3" in line)
    assert "staging/controlPlane" in wait
    assert "1 earlier partition(s) NotReady (canary) > maxUnavailablePartitions 0" in " ".join(screen.split())
    assert "rollout demo-1 RUNNING  release 1.30 -> 1.31.13-gke.1023000" in screen
    assert "next wake-up:" in screen


def test_status_mid_prod_shows_gate_1_numbers_names_the_failure_and_soak_countdowns(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "--status-at", "T+9h10m"]) == 0
    screen = " ".join(capsys.readouterr().out.split())
    assert "partition Partition 0 - 42: 26 clusters unavailable, maxUnavailable is 4" in screen
    # 26 unavailable, 6 named, the rest counted even though the document lists only 20
    assert "prod-001, prod-002, prod-003, prod-004, prod-005, prod-006 +20 more" in screen
    assert "FAILED prod-003 controlPlane -> 1.31.13-gke.1023000: scripted failure" in screen
    assert "Partition 0 - 42 42 4 26" in screen  # size, maxUnavailable, unavailable


def test_status_during_a_soak_counts_down(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--status-at", "30m"]) == 0
    screen = capsys.readouterr().out
    assert "soak ends in 40m" in screen  # test/controlPlane soaks from T+10m for 1h
    assert "the soak of test/controlPlane ends" in " ".join(screen.split())


def test_status_at_as_json_is_the_planners_document(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--status-at", "9h10m", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["sequence"] == "demo" and doc["clusters"] == 300
    assert doc["attention"]["failed"] == [
        {"cluster": "prod-003", "track": "controlPlane", "version": "1.31.13-gke.1023000", "error": "scripted failure"}
    ]
    assert doc["nextWakeUp"]["kind"] == "deadline"
    stages = {(s["stage"], s["track"]): s["state"] for s in doc["rollouts"][0]["stages"]}
    assert stages[("staging", "nodes")] == "COMPLETE" and stages[("prod", "controlPlane")] == "IN_PROGRESS"


def test_the_next_wake_up_skips_timers_whose_run_already_ended() -> None:
    doc = status_document(_demo_at(9 * 3600 + 600))
    # test/controlPlane finished long ago; its 30-day deadline timer is still in the heap but moot
    assert "test/" not in doc["nextWakeUp"]["why"]
    assert "prod/controlPlane" in doc["nextWakeUp"]["why"]


def test_failed_clusters_are_capped_with_their_total() -> None:
    raw = {
        "name": "many-failures",
        "start": "2026-01-05T08:00:00Z",
        "generate": [{"count": 30, "name": "c-{i:02d}", "labels": {"env": "all"}, "version": "1.30.5-gke.1000"}],
        "sequence": {
            "name": "s",
            "channel": "regular",
            "stages": [{"name": "all", "clusterSelector": {"matchLabels": {"env": "all"}}}],
        },
        "simulation": {"failures": [{"cluster": f"c-{i:02d}", "track": "controlPlane"} for i in range(1, 26)]},
        "events": [{"at": "0s", "releaseTarget": {"channel": "regular", "targets": {"1.30": "1.31.13-gke.1023000"}}}],
        "until": "1d",
    }
    sim = Simulator(Scenario.model_validate(raw))
    sim.run()
    attention = status_document(sim)["attention"]
    assert attention["failedTotal"] == 25
    assert len(attention["failed"]) == NAMES_CAP


def test_metrics_follow_the_status_document() -> None:
    sim = _demo_at(9 * 3600 + 600)
    metrics = PlannerMetrics()
    metrics.observe_status(json.dumps(status_document(sim)).encode())
    metrics.observe_commands(sim.report.commands)
    text = metrics.exposition().decode()
    assert 'rollout_planner_rollouts{state="RUNNING"} 1.0' in text
    assert 'rollout_planner_clusters{stage="prod",status="FAILED",track="controlPlane"} 1.0' in text
    assert 'rollout_planner_waits{rule="GATE-1"} 2.0' in text
    assert 'rollout_planner_stage_batches_total{stage="test",track="controlPlane"} 1.0' in text
    # a status that went away reads 0, not its last value
    metrics.observe_status({"rollouts": [], "stages": []})
    assert 'rollout_planner_waits{rule="GATE-1"} 0.0' in metrics.exposition().decode()


@pytest.mark.asyncio
async def test_metrics_take_consumer_lag_when_the_consumer_tells_it() -> None:
    class Lagging:
        async def lag(self) -> dict[tuple[str, int], int]:
            return {("rollout.upgrade-results", 3): 42}

    metrics = PlannerMetrics()
    await metrics.observe_lag(Lagging())
    await metrics.observe_lag(object())  # the port's consumers cannot tell: nothing happens
    assert 'rollout_planner_consumer_lag{partition="3",topic="rollout.upgrade-results"} 42.0' in (
        metrics.exposition().decode()
    )


@pytest.mark.integration
def test_rollout_status_reads_the_document_from_redis(redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    namespace = f"t-status-{uuid.uuid4().hex[:8]}"
    doc = status_document(_demo_at(2 * 3600))

    async def store() -> None:
        redis = RedisStore(redis_url, namespace=namespace)
        try:
            await redis.put(STATUS_KEY, json.dumps(doc).encode())
        finally:
            await redis.close()

    asyncio.run(store())
    common = ["--redis", redis_url, "--namespace", namespace]
    assert main(["status", *common]) == 0
    screen = capsys.readouterr().out
    assert "rollout status · sequence demo (channel regular) · 300 clusters" in screen
    assert "GATE-3" in screen and "staging/controlPlane" in screen
    assert main(["status", "--stage", "staging", "--json", *common]) == 0
    assert [s["name"] for s in json.loads(capsys.readouterr().out)["stages"]] == ["staging"]
    assert main(["status", "--stage", "nope", *common]) == 1
    assert capsys.readouterr().err == "error: unknown stage 'nope': sequence 'demo' has test, staging, prod\n"
