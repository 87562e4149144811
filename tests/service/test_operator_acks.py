"""Acknowledged operator commands (OPS-3, OPS-5, SEQ-7, OPS-4) through the CLI, with a planner on the real
Kafka and Redis: the CLI waits for the answer and its exit code says it (0 accepted, 1 rejected,
4 no answer)."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from planner_harness import NEW, OLD, make_planner, release
from planner_harness import settings as harness_settings

from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.redis_store import RedisStore
from rollout_cli.main import main
from rollout_common.status import Track
from rollout_common.topics import ALL
from rollout_executor.drivers.port import DriverOutcome
from rollout_executor.executor import Executor
from rollout_executor.ledger import UpgradeLedger
from rollout_executor.metrics import ExecutorMetrics
from rollout_executor.service import ExecutorService
from rollout_executor.settings import ExecutorSettings
from rollout_executor.target import UpgradeTarget
from rollout_planner.service import initial_state
from rollout_planner.service.checkpoint import SEQUENCE_KEY
from rollout_planner.service.clock import ScaledClock
from rollout_planner.service.planner import Planner

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


@dataclass
class System:
    prefix: str
    common: list[str]
    store: RedisStore
    bus: KafkaBus


async def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = await asyncio.to_thread(main, list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
async def planned(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str, capsys: pytest.CaptureFixture[str]
) -> AsyncIterator[System]:
    """A planner (the harness's two-stage fleet, canary then prod) with rollout svc-1 running."""
    prefix = topic_prefix + "."
    bus = KafkaBus(kafka_bootstrap, client_id=f"{prefix}planner")
    store = RedisStore(redis_url, namespace=prefix)
    await bus.ensure_topics([t.spec(prefix) for t in ALL])
    planner = make_planner(bus=bus, store=store, prefix=prefix, clock=ScaledClock(origin=time.time()))
    task = asyncio.create_task(planner.run())
    common = ["--bootstrap", kafka_bootstrap, "--redis", redis_url, "--topic-prefix", prefix, "--namespace", prefix]
    system = System(prefix=prefix, common=common, store=store, bus=bus)
    try:
        await release(bus, prefix)
        async with asyncio.timeout(30):
            while True:
                if (await _status(system, capsys)).get("rollouts"):
                    break
                await asyncio.sleep(0.1)
        yield system
    finally:
        planner.stop()
        await task
        await bus.close()
        await store.close()


async def _status(system: System, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code, out, _ = await _cli(capsys, "status", "--json", *system.common)
    return json.loads(out) if code == 0 else {}


async def test_ops3_an_accepted_pause_prints_accepted_and_exits_0(
    planned: System, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = await _cli(capsys, "pause", "--rollout", "svc-1", *planned.common)
    assert (code, err) == (0, "")
    assert out.startswith("accepted: pause cmd-") and out.rstrip().endswith("for rollout svc-1: pause applied")
    code, out, _ = await _cli(capsys, "resume", "--all", *planned.common)
    assert code == 0 and out.rstrip().endswith("for every active rollout: resume applied")


async def test_ops5_an_unknown_rollout_is_rejected_with_the_reason_and_exit_1(
    planned: System, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = await _cli(capsys, "cancel", "--rollout", "svc-9", *planned.common)
    assert (code, out) == (1, "")
    assert err.startswith("rejected: cancel cmd-") and err.rstrip().endswith("for rollout svc-9: unknown rollout svc-9")
    assert (await _status(planned, capsys))["rollouts"][0]["state"] == "RUNNING"


async def test_ops3_a_rejected_soak_override_names_the_stage(
    planned: System, capsys: pytest.CaptureFixture[str]
) -> None:
    # --stage is checked against the status first: a name the planner does not know never goes out
    code, _, err = await _cli(capsys, "soak", "--stage", "nope", "--version", NEW, "--soak", "1h", *planned.common)
    assert code == 1 and "unknown stage 'nope': sequence 'svc' has canary, prod" in err
    code, out, _ = await _cli(capsys, "soak", "--stage", "canary", "--version", NEW, "--soak", "1h", *planned.common)
    assert code == 0 and out.rstrip().endswith(f"canary / {NEW} set to 1h: soak_override applied")


async def test_chk1_an_approve_of_a_stage_without_that_gate_is_rejected_with_the_reason_and_exit_1(
    planned: System, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = await _cli(
        capsys, "approve", "--rollout", "svc-1", "--stage", "prod", "--gate", "before", "--by", "alice", *planned.common
    )
    assert (code, out) == (1, "")
    assert err.startswith("rejected: approve cmd-")
    assert err.rstrip().endswith(
        "the before gate of stage prod for rollout svc-1: stage prod has no before approval gate (CHK-1)"
    )


async def test_no_wait_publishes_and_exits_0_without_an_answer(
    planned: System, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = await _cli(capsys, "pause", "--all", "--no-wait", *planned.common)
    assert code == 0
    assert out.startswith("published pause cmd-") and "the planner acknowledges it on the progress topic" in out


async def test_no_answer_within_the_timeout_exits_4_and_says_how_to_check(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = topic_prefix + "."
    bus = KafkaBus(kafka_bootstrap, client_id=prefix)
    try:
        await bus.ensure_topics([t.spec(prefix) for t in ALL])  # topics, but no planner
    finally:
        await bus.close()
    argv = ["pause", "--rollout", "svc-1", "--timeout", "1", "--bootstrap", kafka_bootstrap, "--topic-prefix", prefix]
    code, out, err = await _cli(capsys, *argv)
    assert (code, out) == (4, "")
    assert err.startswith("error: pause cmd-")
    assert "was published, but the planner did not answer within 1 s: check that it runs" in err
    assert "`rollout watch --plain --from-beginning | grep cmd-" in err
    assert err.count("\n") == 1


def _fleet_file(tmp_path: Path, stages: list[dict[str, Any]]) -> Path:
    path = tmp_path / "fleet.yaml"
    clusters = [("can-1", "canary"), ("can-2", "canary"), ("prod-1", "prod"), ("prod-2", "prod")]
    document = {
        "clusters": [{"name": n, "labels": {"env": e}, "version": OLD} for n, e in clusters],
        "sequence": {"name": "svc", "channel": "regular", "stages": stages},
    }
    path.write_text(yaml.safe_dump(document))
    return path


_CANARY = {"name": "canary", "clusterSelector": {"matchLabels": {"env": "canary"}}, "soak": "1d"}
_PROD = {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}, "soak": "1d"}


async def test_seq7_a_change_removing_an_active_stage_is_refused_and_not_stored(
    planned: System, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The canary stage runs svc-1: a sequence without it is refused (SEQ-7), by this engine and the next."""
    path = _fleet_file(tmp_path, [{**_PROD, "clusterSelector": {}}])
    code, out, err = await _cli(capsys, "apply", str(path), *planned.common)
    assert (code, out) == (1, "")
    assert err.startswith(f"rejected: sequence 'svc' from {path} (4 cluster(s) published to the inventory)")
    stored = json.loads(await planned.store.get(SEQUENCE_KEY) or b"{}")
    assert [stage["name"] for stage in stored["stages"]] == ["canary", "prod"]  # the one in force, not the refused


async def test_seq7_a_changed_soak_is_applied_acknowledged_and_stored(
    planned: System, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _fleet_file(tmp_path, [{**_CANARY, "soak": "2d"}, {**_PROD, "upstream": "canary"}])
    code, out, err = await _cli(capsys, "apply", str(path), *planned.common)
    assert (code, err) == (0, "")
    assert out.startswith(f"accepted: sequence 'svc' from {path}")
    stored = json.loads(await planned.store.get(SEQUENCE_KEY) or b"{}")
    assert stored["stages"][0]["soak"] == 2 * 86400


async def test_chk2_seq7_a_change_from_the_operator_topic_alone_is_stored_for_the_check_runner(
    planned: System, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sequence change published without `rollout apply` storing it (`--no-wait` here; the
    Kubernetes bridge does the same): the planner stores the sequence it accepted, where the check
    runner reads each check's query and conditions, and a planner without a snapshot starts from."""
    path = _fleet_file(tmp_path, [{**_CANARY, "soak": "3d"}, {**_PROD, "upstream": "canary"}])
    code, _, err = await _cli(capsys, "apply", str(path), "--no-wait", *planned.common)
    assert (code, err) == (0, "")
    async with asyncio.timeout(60):
        while True:  # until the planner has taken the change and written the batch that took it
            stored = json.loads(await planned.store.get(SEQUENCE_KEY) or b"{}")
            if stored.get("stages", [{}])[0].get("soak") == 3 * 86400:
                break
            await asyncio.sleep(0.1)


class FailingOnce:
    """Counts control-plane upgrades per cluster; fails each cluster in `failing` on its first one only (a
    driver timeout, fixed since). Node upgrades succeed and are not counted: they follow a control plane."""

    name = "failing-once"

    def __init__(self, *, failing: frozenset[str]) -> None:
        self.failing = set(failing)
        self.calls: Counter[str] = Counter()
        self.running = 0

    async def upgrade(self, target: UpgradeTarget, *, fencing_token: int) -> DriverOutcome:
        if target.track is not Track.CONTROL_PLANE:
            return DriverOutcome(succeeded=True)
        self.calls[target.cluster] += 1
        self.running += 1
        try:
            await asyncio.sleep(0.05)
        finally:
            self.running -= 1
        if target.cluster in self.failing:
            self.failing.discard(target.cluster)
            return DriverOutcome(succeeded=False, error="driver timeout")
        return DriverOutcome(succeeded=True)


async def _until(condition: Callable[[], bool], *, timeout_s: float = 60) -> None:
    async with asyncio.timeout(timeout_s):
        while True:  # a driver in this process: nothing to wait on but its counters
            if condition():
                return
            await asyncio.sleep(0.05)


@pytest.mark.parametrize("target", [["--rollout", "svc-1", "--cluster", "can-1"], ["--all"]], ids=["cluster", "all"])
async def test_ops4_retry_of_a_failed_cluster_runs_it_again_through_an_executor(
    planned: System, capsys: pytest.CaptureFixture[str], target: list[str]
) -> None:
    driver = FailingOnce(failing=frozenset({"can-1"}))
    settings = ExecutorSettings(
        topic_prefix=planned.prefix, group_id=f"{planned.prefix}executors", metrics_port=0, create_topics=False
    )
    ledger = UpgradeLedger(planned.store, executor_id="e1", lease_s=30)
    executor = Executor(
        bus=planned.bus,
        ledger=ledger,
        driver=driver,
        metrics=ExecutorMetrics(),
        executor_id="e1",
        topic_prefix=planned.prefix,
    )
    stop = asyncio.Event()
    running = asyncio.create_task(ExecutorService(settings, bus=planned.bus, executor=executor).run(stop))
    try:
        await _until(lambda: driver.calls["can-1"] == 1 and not driver.running)
        code, out, err = await _cli(capsys, "retry", *target, *planned.common)
        assert (code, err) == (0, ""), err
        assert out.startswith("accepted: retry cmd-")
        await _until(lambda: driver.calls["can-1"] >= 2 and not driver.running, timeout_s=30)
    finally:
        stop.set()
        await running
    assert driver.calls["can-1"] == 2, "the retried upgrade ran once more, and only once"


async def test_cluster_groups_applied_with_the_fleet_partition_a_planner_started_from_the_store(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`rollout apply` publishes the file's cluster groups to the inventory; the planner partitions by their
    labels (PART-2, clusterGroupSelector as Fleet's)."""
    prefix = topic_prefix + "."
    common = ["--bootstrap", kafka_bootstrap, "--redis", redis_url, "--topic-prefix", prefix, "--namespace", prefix]
    document = {
        "clusters": [
            {"name": f"{zone}-{i}", "labels": {"zone": zone}, "version": OLD} for zone in "ew" for i in (1, 2)
        ],
        "clusterGroups": [
            {"name": "east", "labels": {"region": "us-east"}, "selector": {"matchLabels": {"zone": "e"}}},
            {"name": "west", "labels": {"region": "us-west"}, "selector": {"matchLabels": {"zone": "w"}}},
        ],
        "sequence": {
            "name": "grp",
            "stages": [
                {
                    "name": "all",
                    "clusterSelector": {},
                    "rolloutStrategy": {
                        "partitions": [
                            {"name": "first", "clusterGroupSelector": {"matchLabels": {"region": "us-west"}}},
                            {"name": "second", "clusterGroupSelector": {"matchLabels": {"region": "us-east"}}},
                        ]
                    },
                }
            ],
        },
    }
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(document))
    code, out, err = await _cli(capsys, "apply", str(path), *common)
    assert (code, err) == (0, "")
    assert "4 cluster(s) published to the inventory with 2 cluster group(s)" in out

    bus = KafkaBus(kafka_bootstrap, client_id=f"{prefix}planner")
    store = RedisStore(redis_url, namespace=prefix)
    planner = Planner(
        bus=bus,
        store=store,
        settings=harness_settings(prefix),
        clock=ScaledClock(origin=time.time()),
        initial_state=lambda: initial_state.from_store(store),
    )
    task = asyncio.create_task(planner.run())
    system = System(prefix=prefix, common=common, store=store, bus=bus)
    try:
        await release(bus, prefix)
        async with asyncio.timeout(30):
            while True:
                status = await _status(system, capsys)
                if status.get("rollouts") and status.get("clusters") == 4:
                    break
                await asyncio.sleep(0.1)
        partitions = status["stages"][0]["tracks"]["controlPlane"]["partitions"]
        assert [(p["name"], p["clusters"]) for p in partitions] == [("first", 2), ("second", 2)]
    finally:
        planner.stop()
        await task
        await bus.close()
        await store.close()
