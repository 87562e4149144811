"""One whole rollout of 60 clusters for a failover test: planner, two executors, a health reporter
and the health monitor as processes on the infrastructure the test gives (a three-node Kafka
cluster or one broker, Redis through Sentinel or one server), faults fired at points of progress,
then an independent audit.

Upgrades run through the command driver with `tests/executor/fake_upgrade.py`, which appends a
line to a file at every start: the audit counts the driver's real calls, not only the topics.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from aiokafka import AIOKafkaConsumer, TopicPartition
from chaos_audit import TRACKS, Audit, audit, decode
from chaos_processes import ChaosProcesses
from rollout_harness import (
    cluster_names,
    fleet_document,
    group_lag,
    last_wait,
    publish_release,
    read_topic,
    stage_plans,
    start_health,
)

from rollout_adapters.redis_store import RedisStore
from rollout_common.topics.catalog import (
    INVENTORY,
    OPERATOR_COMMANDS,
    PROGRESS,
    READINESS,
    RELEASE_TARGETS,
    STAGE_ADVANCE,
    UPGRADE_RESULTS,
    TopicDef,
)
from rollout_devenv import KafkaCluster, RedisSentinelGroup
from rollout_devenv._cluster_probe import describe_partitions

OLD = "1.30.5-gke.1000"
NEW = "1.31.13-gke.1023000"
CHANNEL = "regular"
FAKE_UPGRADE = Path(__file__).resolve().parents[1] / "executor" / "fake_upgrade.py"
UPGRADE_S = 0.05
TIME_SCALE = 7200.0  # a 1 h soak takes half a second
EXECUTOR_LEASE_S = 10
PLANNER_LEASE_S = 5
COMPLETE_TIMEOUT_S = 150.0
# stage -> (clusters, rolloutStrategy): staging and prod in two partitions each, strictly in turn
# (GATE-3), prod's partitions in two batches each, the second gated on the first (GATE-1)
STAGES: dict[str, tuple[int, dict[str, Any]]] = {
    "dev": (10, {"maxNew": 10, "maxUnavailable": "50%", "autoPartitionThreshold": 30}),
    "staging": (
        20,
        {
            "maxNew": 10,
            "maxUnavailable": "10%",
            "autoPartitionThreshold": 10,
            "autoPartitionSize": "50%",
            "maxUnavailablePartitions": 0,
        },
    ),
    "prod": (
        30,
        {
            "maxNew": 8,
            "maxUnavailable": "10%",
            "autoPartitionThreshold": 10,
            "autoPartitionSize": "50%",
            "maxUnavailablePartitions": 0,
        },
    ),
}
PLANNER_INPUTS = (INVENTORY, READINESS, UPGRADE_RESULTS, OPERATOR_COMMANDS, RELEASE_TARGETS)


ALL_CLUSTERS = [name for stage in STAGES for name in cluster_names(STAGES, stage)]
EXPECTED_UPGRADES = len(ALL_CLUSTERS) * len(TRACKS)


@dataclass(frozen=True)
class Infra:
    """Where the services find Kafka and Redis, and the variables that say how."""

    bootstrap: str
    redis_url: str  # the primary's address when the run starts (for `rollout apply`)
    env: dict[str, str]
    sentinels: Sequence[tuple[str, int]] = ()

    def store(self, namespace: str) -> RedisStore:
        return RedisStore(self.redis_url, namespace=namespace, sentinels=self.sentinels)


@dataclass
class Run:
    infra: Infra
    workdir: Path
    prefix: str = field(default_factory=lambda: f"fo-{uuid.uuid4().hex[:8]}.")

    @property
    def namespace(self) -> str:
        return self.prefix.rstrip(".")

    def topic(self, topic: TopicDef) -> str:
        return self.prefix + topic.name

    @property
    def driver_log(self) -> Path:
        return self.workdir / "driver-calls.log"


def apply_fleet(run: Run) -> None:
    path = run.workdir / "fleet.yaml"
    path.write_text(yaml.safe_dump(fleet_document("failover", STAGES, version=OLD, channel=CHANNEL)))
    command = [sys.executable, "-m", "rollout_cli.main", "apply", str(path), "--bootstrap", run.infra.bootstrap]
    command += ["--redis", run.infra.redis_url, "--topic-prefix", run.prefix, "--namespace", run.namespace]
    # The infrastructure's settings (replication, Sentinels) for the topics and the store apply makes.
    env = os.environ | run.infra.env
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, env=env)
    assert done.returncode == 0, done.stderr


def start_services(processes: ChaosProcesses, run: Run) -> None:
    processes.start(
        "planner",
        ["rollout_planner.service"],
        {
            "ROLLOUT_REDIS_NAMESPACE": run.namespace,
            "ROLLOUT_PLANNER_GROUP": f"{run.prefix}planner",
            "ROLLOUT_TIME_SCALE": str(TIME_SCALE),
            "ROLLOUT_HTTP_PORT": "0",
            "ROLLOUT_POLL_TIMEOUT_S": "0.2",
            "ROLLOUT_RETRY_BACKOFF_MAX_S": "1",
            "ROLLOUT_SEQUENCE_WAIT_S": "0.3",
            "ROLLOUT_LEASE_TTL_S": str(PLANNER_LEASE_S),
            "ROLLOUT_LEASE_RETRY_S": "0.5",
        },
    )
    for number in range(2):
        processes.start(
            f"executor-{number}",
            ["rollout_executor"],
            {
                "ROLLOUT_EXECUTOR_ID": f"executor-{number}",
                "ROLLOUT_GROUP_ID": f"{run.prefix}executors",
                "ROLLOUT_REDIS_NAMESPACE": f"{run.namespace}.executors",
                "ROLLOUT_DRIVER": "command",
                "ROLLOUT_COMMAND__EXECUTABLE": sys.executable,
                "ROLLOUT_COMMAND__ARGS": json.dumps([str(FAKE_UPGRADE), str(run.driver_log), str(UPGRADE_S)]),
                "ROLLOUT_COMMAND__TIMEOUT_S": "60",
                "ROLLOUT_MAX_CONCURRENT_UPGRADES": "10",
                "ROLLOUT_LEASE_S": str(EXECUTOR_LEASE_S),
                "ROLLOUT_METRICS_PORT": "0",
                "ROLLOUT_SHUTDOWN_GRACE_S": "2",
            },
        )
    start_health(
        processes,
        clusters=ALL_CLUSTERS,
        reporter_id="reporter-failover",
        monitor_env={"ROLLOUT_DATA_DIR": str(run.workdir / "monitor-data")},
    )


async def wait_for_fleet(run: Run, processes: ChaosProcesses) -> None:
    store = run.infra.store(run.namespace)
    try:
        async with asyncio.timeout(90):
            while True:
                assert not processes.unexpected_exits(), (
                    f"exited: {processes.unexpected_exits()}\n{processes.log_tail('planner')}"
                )
                raw = await store.get("status")
                if raw is not None and json.loads(raw)["clusters"] == len(ALL_CLUSTERS):
                    return
                await asyncio.sleep(0.2)
    finally:
        await store.close()


class Watcher:
    """Follows progress, stage-advance and upgrade results live with a plain consumer, so faults
    fire at points of progress and the test knows when every track is COMPLETE."""

    def __init__(self, run: Run) -> None:
        self._run = run
        self.succeeded: set[tuple[str, str]] = set()
        self.batches = 0
        self.complete: set[tuple[str, str]] = set()
        self.changed = asyncio.Event()
        self.last_change = time.monotonic()

    async def follow(self) -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self._run.infra.bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            tps = [TopicPartition(self._run.topic(PROGRESS), p) for p in range(PROGRESS.partitions)]
            tps += [TopicPartition(self._run.topic(STAGE_ADVANCE), p) for p in range(STAGE_ADVANCE.partitions)]
            tps += [TopicPartition(self._run.topic(UPGRADE_RESULTS), p) for p in range(UPGRADE_RESULTS.partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            while True:
                batches = await consumer.getmany(timeout_ms=200)
                for records in batches.values():
                    for record in records:
                        self._see(record.topic, decode(record.topic, 0, 0, 0, record.headers, record.value).body)
                if batches:
                    self.last_change = time.monotonic()
                    self.changed.set()
        finally:
            await consumer.stop()

    def _see(self, topic: str, body: dict[str, Any] | Any) -> None:
        kind, outcome = body.get("kind"), body.get("outcome")
        if topic.endswith(STAGE_ADVANCE.name):
            self.batches += 1
        elif kind == "stage_transition" and body.get("state") == "COMPLETE":
            self.complete.add((body["stage"], body["track"]))
        elif outcome == "succeeded":
            self.succeeded.add((str(body.get("cluster")), str(body.get("track"))))

    @property
    def all_complete(self) -> bool:
        return len(self.complete) >= len(STAGES) * len(TRACKS)

    async def until(self, holds: Callable[[], bool], *, what: str, timeout_s: float = COMPLETE_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not holds():
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"waited {timeout_s:.0f} s for {what}: {len(self.succeeded)}/{EXPECTED_UPGRADES} upgrades, "
                    f"{self.batches} batches, complete {sorted(self.complete)}"
                )
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), 1.0)

    async def until_fraction(self, fraction: float) -> None:
        await self.until(
            lambda: len(self.succeeded) >= fraction * EXPECTED_UPGRADES or self.all_complete,
            what=f"{fraction:.0%} of the upgrades",
        )


async def settled_lag(run: Run, *, timeout_s: float = 60.0) -> dict[str, int]:
    """Both groups' lag once it is 0 (or what is left after `timeout_s`)."""
    deadline = time.monotonic() + timeout_s
    while True:
        lag = await group_lag(run.infra.bootstrap, run.prefix, f"{run.prefix}planner", PLANNER_INPUTS)
        lag |= await group_lag(run.infra.bootstrap, run.prefix, f"{run.prefix}executors", (STAGE_ADVANCE,))
        if not lag or time.monotonic() > deadline:
            return lag
        await asyncio.sleep(0.5)


def driver_calls(run: Run, kind: str = "start") -> Counter[tuple[str, str, str]]:
    """How often the upgrade program was started (or, `kind` "done", finished) per (cluster, track, version)."""
    calls: Counter[tuple[str, str, str]] = Counter()
    if run.driver_log.exists():
        for line in run.driver_log.read_text().splitlines():
            word, *rest = line.split()
            if word == kind:
                cluster, track, version = rest
                calls[(cluster, track, version)] += 1
    return calls


@dataclass
class Outcome:
    audit: Audit
    driver_calls: Counter[tuple[str, str, str]]
    lag: dict[str, int]
    rollout_s: float
    findings: list[str]


Faults = Callable[[Watcher, ChaosProcesses], Awaitable[None]]


async def whole_rollout(infra: Infra, workdir: Path, faults: Faults) -> Outcome:
    """Run the rollout with `faults` fired alongside, then audit topics, driver calls and lag."""
    run = Run(infra=infra, workdir=workdir)
    processes = ChaosProcesses(
        workdir=workdir,
        base_env={
            "ROLLOUT_KAFKA_BOOTSTRAP": infra.bootstrap,
            "ROLLOUT_REDIS_URL": infra.redis_url,
            "ROLLOUT_TOPIC_PREFIX": run.prefix,
            "ROLLOUT_LOG_LEVEL": "INFO",
            **infra.env,
        },
    )
    tasks: list[asyncio.Task[None]] = []
    try:
        start_services(processes, run)
        await asyncio.to_thread(apply_fleet, run)
        await wait_for_fleet(run, processes)
        watcher = Watcher(run)
        tasks.append(asyncio.create_task(watcher.follow()))
        await publish_release(
            infra.bootstrap,
            run.prefix,
            event_id=f"rel-{run.prefix}",
            source="failover-test",
            channel=CHANNEL,
            targets={"1.30": NEW},
        )
        released = time.monotonic()
        injector = asyncio.create_task(faults(watcher, processes))
        tasks.append(injector)

        def done() -> bool:
            if injector.done() and injector.exception() is not None:
                raise injector.exception()  # type: ignore[misc]
            exited = processes.unexpected_exits()
            assert not exited, f"exited by itself: {exited}\n" + "\n".join(
                processes.log_tail(name, 4000) for name in exited
            )
            return watcher.all_complete and injector.done()

        try:
            await watcher.until(done, what="every stage and track COMPLETE")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; planner's last wait: {last_wait(processes, tail_chars=400_000)}") from None
        rollout_s = time.monotonic() - released
        lag = await settled_lag(run)
        result = audit(
            plans=stage_plans(STAGES),
            version=NEW,
            progress=await read_topic(infra.bootstrap, run.prefix, PROGRESS),
            stage_advance=await read_topic(infra.bootstrap, run.prefix, STAGE_ADVANCE),
            results=await read_topic(infra.bootstrap, run.prefix, UPGRADE_RESULTS),
            readiness=await read_topic(infra.bootstrap, run.prefix, READINESS),
            executor_kills={},
            lease_s=EXECUTOR_LEASE_S,
            completions=driver_calls(run, "done"),
        )
        calls = driver_calls(run)
        findings = list(result.findings)
        expected = {(c, t, NEW) for c in ALL_CLUSTERS for t in TRACKS}
        if set(calls) != expected:
            findings.append(f"driver calls for {len(calls)} targets, {len(expected)} expected")
        findings += [f"{key} upgraded {n} times by the driver" for key, n in sorted(calls.items()) if n > 1]
        if lag:
            findings.append(f"lag at the end: {lag}")
        return Outcome(audit=result, driver_calls=calls, lag=lag, rollout_s=rollout_s, findings=findings)
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        processes.kill_all()


# -- the infrastructures and the verdict the failover tests share ---------------------------------

CLUSTER_ENV = {"ROLLOUT_KAFKA_REPLICATION_FACTOR": "3", "ROLLOUT_KAFKA_MIN_INSYNC_REPLICAS": "2"}


def busiest_leader(cluster: KafkaCluster, prefix: str) -> int:
    """The node leading most partitions of the stage-advance and upgrade-results topics."""
    topics = [prefix + STAGE_ADVANCE.name, prefix + UPGRADE_RESULTS.name]
    leaders = Counter(state.leader for state in describe_partitions(cluster.bootstrap, topics).values())
    return leaders.most_common(1)[0][0]


def sentinel_infra(bootstrap: str, group: RedisSentinelGroup, *, extra: dict[str, str] | None = None) -> Infra:
    """Redis through the group's Sentinels, every write confirmed by the replica."""
    primary = group.primary()
    assert primary is not None
    sentinels = [(host, int(port)) for host, port in (a.split(":") for a in group.sentinels)]
    env = {
        "ROLLOUT_REDIS_SENTINELS": ",".join(group.sentinels),
        "ROLLOUT_REDIS_SENTINEL_SERVICE": group.service,
        "ROLLOUT_REDIS_REPLICA_ACKS": "1",
        **(extra or {}),
    }
    return Infra(bootstrap=bootstrap, redis_url=primary.url, env=env, sentinels=sentinels)


def assert_exactly_once(outcome: Outcome, fired: list[str], tmp_path: Path) -> None:
    """Complete, every cluster upgraded once per track (driver log and topics), no gate broken, lag 0."""
    assert outcome.findings == [], f"{fired}\nlogs in {tmp_path}"
    assert outcome.audit.succeeded_keys == EXPECTED_UPGRADES
    assert outcome.audit.duplicates == 0
    assert outcome.audit.gate_violations == 0
    assert sum(outcome.driver_calls.values()) == EXPECTED_UPGRADES
    assert outcome.lag == {}
