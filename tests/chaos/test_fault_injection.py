"""Fault injection: whole rollouts on real Kafka and Redis while a seeded schedule breaks things.

Per seed: 120 simulated clusters in three stages (dev 20, staging 40 in 2 partitions, prod 60 in
2 partitions, strict partition order), the planner, three executors, a health reporter and the
health monitor as separate processes. Once the release is out, a schedule drawn from the seed
fires faults at points of progress (a fraction of all upgrades succeeded):

- `planner`, `executor`, `monitor`, `reporter`: SIGKILL (the whole process group), down for a
  moment, then started again with the same environment;
- `broker`: the module's own Kafka broker stopped (SIGTERM) and started on the same data dir;
- `redis`: the module's own Redis (AOF, fsync always) stopped and started on the same files;
- `relabel`, `move`, `remove`: an inventory change (SEQ-6), aimed at a cluster upgrading right
  then for about two faults in three (SEQ-6a), see `chaos_inputs`;
- `bad_records`: a value that is not JSON and one of the wrong schema on every input topic (BUS-4).

Then an independent audit (`chaos_audit`) reads the topics with a plain aiokafka consumer:
every stage and track COMPLETE, every cluster upgraded exactly once per track (the simulated
driver's world file says what took effect; a second driver start only where the executor running
the first was killed in between), none missing, no batch
above maxNew, every partition's unavailable count rebuilt over time and no batch sent while
GATE-1 or GATE-3 was closed (membership and partitions as the planner's SEQ-6 notices had them),
the membership the planner ends on is the one sent, every bad record dead-lettered, and the
planner's and the executors' consumer groups end with lag 0.

With `ROLLOUT_CHAOS_TOPOLOGY=production` the run stands on a three-node KRaft cluster (topics at
three replicas, two in sync) and on Redis with a replica and three Sentinels (the services through
the Sentinels, every write confirmed by the replica), and `broker` and `redis` give way to:

- `broker_loss`: SIGKILL of the node leading most stage-advance and upgrade-results partitions,
  started again after the down time;
- `controller_loss`: SIGKILL of the active KRaft controller, once another is elected, started
  again after the down time;
- `redis_failover`: SIGKILL of the Redis primary; once Sentinel has promoted the replica, the old
  primary comes back as its replica.

`ROLLOUT_CHAOS_SEEDS` (default 10) seeds, `ROLLOUT_CHAOS_FAULTS` (default 2) process or server
faults per seed (seed s always includes kind s mod 6, so ten seeds cover every kind) and
`ROLLOUT_CHAOS_INPUT_FAULTS` (default 2) input faults per seed (seed s includes kind s mod 4).
`ROLLOUT_CHAOS_REPORT` names a JSON summary to write (`make chaos` renders it into
docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import time
import traceback
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
import yaml
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from chaos_audit import TRACKS, audit, decode, world_completions
from chaos_inputs import INPUT_KINDS, INVENTORY_KINDS, InjectedFleet, Outgoing, bad_records, inventory_record, pick
from chaos_processes import ChaosProcesses
from local_servers import running
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

from rollout_common.topics.catalog import (
    DEAD_LETTER,
    INVENTORY,
    OPERATOR_COMMANDS,
    PROGRESS,
    READINESS,
    RELEASE_TARGETS,
    STAGE_ADVANCE,
    UPGRADE_RESULTS,
    TopicDef,
)
from rollout_devenv import KafkaBroker, KafkaCluster, RedisSentinelGroup, RedisServer
from rollout_devenv._cluster_probe import describe_partitions

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

SEEDS = int(os.environ.get("ROLLOUT_CHAOS_SEEDS", "10"))
FAULTS_PER_SEED = int(os.environ.get("ROLLOUT_CHAOS_FAULTS", "2"))
INPUT_FAULTS_PER_SEED = int(os.environ.get("ROLLOUT_CHAOS_INPUT_FAULTS", "2"))
# BUS-8: a second planner on the same namespace, started mid-rollout in every seed and kept running
SECOND_PLANNER = os.environ.get("ROLLOUT_CHAOS_SECOND_PLANNER", "1") == "1"
REPORT_PATH = os.environ.get("ROLLOUT_CHAOS_REPORT")

OLD = "1.30.5-gke.1000"
NEW = "1.31.13-gke.1023000"
CHANNEL = "regular"
RELEASE_ID = "rel-chaos"
# stage -> (clusters, rolloutStrategy); staging and prod are partitioned and gated strictly
STAGES: dict[str, tuple[int, dict[str, Any]]] = {
    "dev": (20, {"maxNew": 20, "maxUnavailable": "50%", "autoPartitionThreshold": 30}),
    # 2 partitions of 20, strictly one after the other (GATE-3)
    "staging": (
        40,
        {
            "maxNew": 20,
            "maxUnavailable": "10%",
            "autoPartitionThreshold": 30,
            "autoPartitionSize": "50%",
            "maxUnavailablePartitions": 0,
        },
    ),
    # 2 partitions of 30, each in two batches, the second gated on the first being ready (GATE-1)
    "prod": (
        60,
        {
            "maxNew": 15,
            "maxUnavailable": "10%",
            "autoPartitionThreshold": 30,
            "autoPartitionSize": "50%",
            "maxUnavailablePartitions": 0,
        },
    ),
}
TIME_SCALE = 7200.0  # engine seconds per wall second: each 1 h soak takes half a second
UPGRADE_S = 0.25  # simulated duration of each track's upgrade
# long enough that a loaded machine or a Redis restart does not lapse a lease mid-upgrade (a lapsed
# lease stops the driver and another executor runs the upgrade again, BUS-3)
LEASE_S = 10
WORLD_FILE = "world.log"  # the simulated driver's record of completed upgrades, in the seed's workdir
PLANNER_LEASE_S = 3
EXECUTORS = 3
TOPOLOGY = os.environ.get("ROLLOUT_CHAOS_TOPOLOGY", "single")
if TOPOLOGY not in ("single", "production"):
    raise ValueError(f"ROLLOUT_CHAOS_TOPOLOGY must be single or production, not {TOPOLOGY!r}")
SERVER_KINDS = ("broker", "redis") if TOPOLOGY == "single" else ("broker_loss", "controller_loss", "redis_failover")
KINDS = ("planner", "executor", "monitor", "reporter", *SERVER_KINDS)
COMPLETE_TIMEOUT_S = 180.0
# A rollout that has made no progress (no progress event, no upgrade result) this long, with no
# fault under way, has stalled: a gate waits for something that will not come.
STALL_S = 45.0
LAG_TIMEOUT_S = 30.0


ALL_CLUSTERS = [name for stage in STAGES for name in cluster_names(STAGES, stage)]
STAGE_OF = {name: stage for stage in STAGES for name in cluster_names(STAGES, stage)}
EXPECTED_UPGRADES = len(ALL_CLUSTERS) * len(TRACKS)


# -- the schedule ---------------------------------------------------------------------------------


@dataclass
class Fault:
    kind: str
    at_fraction: float  # fires once this fraction of all upgrades has succeeded
    down_s: float  # how long the process or server stays down
    target: str = ""
    fired_at: float | None = None
    took_s: float | None = None
    succeeded_when_fired: int | None = None
    in_flight: bool | None = None  # inventory faults: aimed at a cluster upgrading right then
    detail: str = ""  # what the fault did, once fired


def schedule(seed: int, count: int, input_count: int = 0) -> list[Fault]:
    """Process and server faults as before (seed s includes kind s mod 6), then the input faults
    drawn apart (seed s includes kind s mod 4), so the process faults of a seed stay as they were."""
    faults = _process_faults(seed, count) + _input_faults(seed, input_count)
    if SECOND_PLANNER:
        at = random.Random(7919 * seed + 2).uniform(0.05, 0.6)
        faults.append(Fault(kind="second_planner", at_fraction=round(at, 3), down_s=0.0, target="planner-b"))
    return sorted(faults, key=lambda f: f.at_fraction)


def _input_faults(seed: int, count: int) -> list[Fault]:
    if count <= 0:
        return []
    rng = random.Random(7919 * seed + 1)
    kinds = [INPUT_KINDS[seed % len(INPUT_KINDS)]] + [rng.choice(INPUT_KINDS) for _ in range(count - 1)]
    return [
        Fault(
            kind=kind,
            at_fraction=round(rng.uniform(0.05, 0.8), 3),
            down_s=0.0,
            in_flight=(rng.random() < 0.67) if kind in INVENTORY_KINDS else None,
        )
        for kind in kinds
    ]


def _process_faults(seed: int, count: int) -> list[Fault]:
    if count <= 0:
        return []
    rng = random.Random(seed)
    kinds = [KINDS[seed % len(KINDS)]] + [rng.choice(KINDS) for _ in range(count - 1)]
    rng.shuffle(kinds)
    at = sorted(rng.uniform(0.05, 0.8) for _ in kinds)
    faults = []
    for kind, fraction in zip(kinds, at, strict=True):
        target = {"executor": f"executor-{rng.randrange(EXECUTORS)}", "broker": "kafka", "redis": "redis"}.get(
            kind, kind
        )
        # Kafka nodes and Redis servers are picked when the fault fires (the leader, the primary then).
        faults.append(
            Fault(kind=kind, at_fraction=round(fraction, 3), down_s=round(rng.uniform(0.0, 2.0), 2), target=target)
        )
    return faults


# -- infrastructure of the module: its own broker and Redis, restartable ---------------------------


@dataclass
class ChaosInfra:
    """The module's own Kafka and Redis: one broker and one server, or the production topology."""

    broker: KafkaBroker | KafkaCluster
    redis: RedisServer | RedisSentinelGroup
    env: dict[str, str]

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    @property
    def redis_url(self) -> str:
        """The primary's address now (a replica's, or nothing, in the middle of a failover)."""
        if isinstance(self.redis, RedisSentinelGroup):
            primary = self.redis.primary()
            return (primary or self.redis.servers[0]).url
        return self.redis.url

    def recover(self) -> None:
        """Everything running again: a fault cut short must not leave a server down for the next seed."""
        if isinstance(self.broker, KafkaCluster):
            self.broker.recover()
        else:
            self.broker.start()
        if isinstance(self.redis, RedisSentinelGroup):
            self.redis.recover()
        else:
            self.redis.start()


@pytest.fixture(scope="module")
def chaos_infra() -> Iterator[ChaosInfra]:
    # a chaos run without its servers must fail, never skip
    if TOPOLOGY == "single":
        with (
            running(KafkaBroker(), what="the chaos test's Kafka broker") as broker,
            running(RedisServer(aof=True), what="the chaos test's Redis") as server,
        ):
            yield ChaosInfra(broker=broker, redis=server, env={})
        return
    with (
        running(KafkaCluster(), what="the chaos test's Kafka cluster") as cluster,
        running(RedisSentinelGroup(), what="the chaos test's Redis with Sentinel") as group,
    ):
        env = {
            "ROLLOUT_KAFKA_REPLICATION_FACTOR": "3",
            "ROLLOUT_KAFKA_MIN_INSYNC_REPLICAS": "2",
            "ROLLOUT_REDIS_SENTINELS": ",".join(group.sentinels),
            "ROLLOUT_REDIS_SENTINEL_SERVICE": group.service,
            "ROLLOUT_REDIS_REPLICA_ACKS": "1",
        }
        yield ChaosInfra(broker=cluster, redis=group, env=env)


@dataclass
class Report:
    runs: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.time)

    def write(self) -> None:
        if not REPORT_PATH:
            return
        document = {
            "generated_at": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "seeds": SEEDS,
            "topology": TOPOLOGY,
            "faults_per_seed": FAULTS_PER_SEED,
            "input_faults_per_seed": INPUT_FAULTS_PER_SEED,
            "clusters": len(ALL_CLUSTERS),
            "stages": len(STAGES),
            "executors": EXECUTORS,
            "total_wall_s": round(time.time() - self.started, 1),
            "runs": self.runs,
        }
        path = Path(REPORT_PATH)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, indent=2) + "\n")


@pytest.fixture(scope="module")
def chaos_report() -> Iterator[Report]:
    report = Report()
    yield report
    report.write()


# -- talking to the services and reading the topics ------------------------------------------------


@dataclass
class Seed:
    seed: int
    prefix: str
    bootstrap: str
    redis_url: str
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)  # the topology's settings, for every process

    @property
    def namespace(self) -> str:
        return self.prefix.rstrip(".")

    def topic(self, topic: TopicDef) -> str:
        return self.prefix + topic.name

    @property
    def planner_group(self) -> str:
        return f"{self.prefix}planner"

    @property
    def executor_group(self) -> str:
        return f"{self.prefix}executors"


def apply_fleet(run: Seed) -> None:
    path = run.workdir / "fleet.yaml"
    path.write_text(yaml.safe_dump(fleet_document("chaos", STAGES, version=OLD, channel=CHANNEL)))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rollout_cli.main",
            "apply",
            str(path),
            "--bootstrap",
            run.bootstrap,
            "--redis",
            run.redis_url,
            "--topic-prefix",
            run.prefix,
            "--namespace",
            run.namespace,
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        env=os.environ | run.env,
    )
    assert done.returncode == 0, done.stderr


def start_services(processes: ChaosProcesses, run: Seed) -> None:
    processes.start(
        "planner",
        ["rollout_planner.service"],
        {
            "ROLLOUT_REDIS_NAMESPACE": run.namespace,
            "ROLLOUT_PLANNER_GROUP": run.planner_group,
            "ROLLOUT_TIME_SCALE": str(TIME_SCALE),
            "ROLLOUT_HTTP_PORT": "0",
            "ROLLOUT_POLL_TIMEOUT_S": "0.2",
            "ROLLOUT_RETRY_BACKOFF_MAX_S": "2",
            "ROLLOUT_SEQUENCE_WAIT_S": "0.3",
            # BUS-8: a standby takes over within lease TTL + retry of the active one's last renewal
            "ROLLOUT_LEASE_TTL_S": str(PLANNER_LEASE_S),
            "ROLLOUT_LEASE_RETRY_S": "0.5",
        },
    )
    for number in range(EXECUTORS):
        processes.start(
            f"executor-{number}",
            ["rollout_executor"],
            {
                "ROLLOUT_EXECUTOR_ID": f"executor-{number}",
                "ROLLOUT_GROUP_ID": run.executor_group,
                "ROLLOUT_REDIS_NAMESPACE": f"{run.namespace}.executors",
                "ROLLOUT_DRIVER": "simulated",
                "ROLLOUT_SIMULATED__DURATIONS_S": json.dumps({"controlPlane": UPGRADE_S, "nodes": UPGRADE_S}),
                # the simulated fleet, shared by the executors and outliving them: the audit counts
                # the upgrades that took effect there, and a new lease holder probes it
                "ROLLOUT_SIMULATED__WORLD_FILE": str(run.workdir / WORLD_FILE),
                "ROLLOUT_MAX_CONCURRENT_UPGRADES": "10",
                "ROLLOUT_LEASE_S": str(LEASE_S),
                "ROLLOUT_METRICS_PORT": "0",
                "ROLLOUT_SHUTDOWN_GRACE_S": "2",
            },
        )
    start_health(processes, clusters=ALL_CLUSTERS, reporter_id="reporter-chaos", monitor_env={})


async def wait_for_fleet(run: Seed, processes: ChaosProcesses) -> None:
    client = aioredis.Redis.from_url(run.redis_url)
    try:
        async with asyncio.timeout(90):
            while True:
                assert not processes.unexpected_exits(), (
                    f"exited: {processes.unexpected_exits()}\n{processes.log_tail('planner')}"
                )
                raw = await client.get(f"{run.namespace}:status")
                if raw is not None and json.loads(raw)["clusters"] == len(ALL_CLUSTERS):
                    return
                await asyncio.sleep(0.2)
    finally:
        await client.aclose()


class Watcher:
    """Follows progress and upgrade results live (its own plain consumer, no group), so faults can
    fire at points of progress, aim at clusters upgrading right then, and the test knows when every
    track is COMPLETE."""

    def __init__(self, run: Seed) -> None:
        self._run = run
        self.succeeded: set[tuple[str, str]] = set()
        self.started: set[tuple[str, str]] = set()
        self.finished: set[tuple[str, str]] = set()
        self.handed_out: set[str] = set()
        self.complete: set[tuple[str, str]] = set()
        self.changed = asyncio.Event()
        self.last_change = time.monotonic()
        self.injecting = False  # a fault is under way: silence is expected, not a stall

    async def follow(self) -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self._run.bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            tps = [TopicPartition(self._run.topic(PROGRESS), p) for p in range(PROGRESS.partitions)]
            tps += [TopicPartition(self._run.topic(UPGRADE_RESULTS), p) for p in range(UPGRADE_RESULTS.partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            while True:
                batches = await consumer.getmany(timeout_ms=200)
                for records in batches.values():
                    for record in records:
                        # the schedule's bad records are on the results topic too
                        self._see(decode(record.topic, 0, 0, 0, record.headers, record.value).body)
                if batches:
                    self.last_change = time.monotonic()
                    self.changed.set()
        finally:
            await consumer.stop()

    def _see(self, body: Mapping[str, Any]) -> None:
        kind, outcome = body.get("kind"), body.get("outcome")
        if kind == "stage_transition" and body.get("state") == "COMPLETE":
            self.complete.add((body["stage"], body["track"]))
        elif kind == "stage_advance" and isinstance(body.get("clusters"), list):
            self.handed_out.update(body["clusters"])
        elif outcome in ("started", "succeeded", "failed") and kind in (None, "upgrade_result"):
            key = (str(body.get("cluster")), str(body.get("track")))
            (self.started if outcome == "started" else self.finished).add(key)
            if outcome == "succeeded":
                self.succeeded.add(key)

    @property
    def upgrading(self) -> set[str]:
        return {cluster for cluster, _ in self.started - self.finished}

    @property
    def all_complete(self) -> bool:
        return len(self.complete) >= len(STAGES) * len(TRACKS)


@dataclass
class Inputs:
    """What the input faults need: the test's view of the inventory and a producer of its own."""

    run: Seed
    fleet: InjectedFleet
    watcher: Watcher
    sent_bad: int = 0
    changes: list[str] = field(default_factory=list)

    async def send(self, records: list[Outgoing]) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=self.run.bootstrap, enable_idempotence=True)
        await producer.start()
        try:
            for out in records:
                await producer.send_and_wait(self.run.topic(out.topic), out.value, key=out.key, headers=out.headers)
        finally:
            await producer.stop()

    async def inject(self, fault: Fault, serial: int) -> None:
        if fault.kind == "bad_records":
            records = bad_records(self.run.seed, serial)
            await self.send(records)
            self.sent_bad += len(records)
            fault.target, fault.detail = "input topics", f"{len(records)} bad records"
            return
        picked = pick(
            fault.kind,
            fleet=self.fleet,
            in_flight_wanted=bool(fault.in_flight),
            upgrading=self.watcher.upgrading,
            handed_out=self.watcher.handed_out,
            rng=random.Random(f"{self.run.seed}-{serial}"),
        )
        if picked is None:
            fault.detail = "no cluster to change"
            return
        event_id = f"chaos-inventory-{self.run.seed}-{serial}"
        await self.send([inventory_record(picked.change, event_id=event_id)])
        fault.target, fault.in_flight, fault.detail = picked.cluster, picked.in_flight, picked.detail
        self.changes.append(picked.detail)


async def inject(fault: Fault, processes: ChaosProcesses, infra: ChaosInfra, inputs: Inputs, serial: int) -> None:
    started = time.time()
    fault.fired_at = started
    if fault.kind in INPUT_KINDS:
        await inputs.inject(fault, serial)
    elif fault.kind == "second_planner":
        # the same command line and environment as the planner: what a second replica would run
        processes.start(fault.target, processes.specs["planner"].module_args, processes.specs["planner"].env)
        fault.detail = "started beside the planner, kept running"
    elif fault.kind in ("planner", "executor", "monitor", "reporter"):
        processes.kill(fault.target)
        await asyncio.sleep(fault.down_s)
        processes.restart(fault.target)
    elif fault.kind == "broker" and isinstance(infra.broker, KafkaBroker):
        await asyncio.to_thread(infra.broker.stop)
        await asyncio.sleep(fault.down_s)
        await asyncio.to_thread(infra.broker.start)
    elif fault.kind == "redis" and isinstance(infra.redis, RedisServer):
        await asyncio.to_thread(infra.redis.stop)
        await asyncio.sleep(fault.down_s)
        await asyncio.to_thread(infra.redis.start)
    elif fault.kind in ("broker_loss", "controller_loss") and isinstance(infra.broker, KafkaCluster):
        await _lose_a_node(fault, infra.broker, inputs.run.prefix)
    elif fault.kind == "redis_failover" and isinstance(infra.redis, RedisSentinelGroup):
        old, promoted = await asyncio.to_thread(infra.redis.kill_primary)
        await asyncio.to_thread(infra.redis.bring_back, old)
        fault.target, fault.detail = f"redis :{old.port}", f"replica :{promoted.port} promoted"
    else:
        raise AssertionError(fault.kind)
    fault.took_s = round(time.time() - started, 2)


async def _lose_a_node(fault: Fault, cluster: KafkaCluster, prefix: str) -> None:
    """SIGKILL the busiest leader (broker_loss) or the active controller, then start it again."""
    if fault.kind == "broker_loss":
        topics = [prefix + STAGE_ADVANCE.name, prefix + UPGRADE_RESULTS.name]
        found = await asyncio.to_thread(describe_partitions, cluster.bootstrap, topics)
        leaders = [state.leader for state in found.values()]
        node = max(set(leaders), key=leaders.count)
        cluster.node(node).kill()
    else:
        node = await asyncio.to_thread(cluster.wait_for_controller)
        cluster.node(node).kill()
        elected = await asyncio.to_thread(cluster.wait_for_controller, other_than=node)
        fault.detail = f"node {elected} elected"
    fault.target = f"kafka node {node}"
    await asyncio.sleep(fault.down_s)
    await asyncio.to_thread(cluster.node(node).start)


async def run_faults(
    faults: list[Fault],
    watcher: Watcher,
    processes: ChaosProcesses,
    infra: ChaosInfra,
    inputs: Inputs,
) -> None:
    for serial, fault in enumerate(faults):
        while len(watcher.succeeded) < fault.at_fraction * EXPECTED_UPGRADES and not watcher.all_complete:
            watcher.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(watcher.changed.wait(), 1.0)
        fault.succeeded_when_fired = len(watcher.succeeded)
        watcher.injecting = True
        try:
            await inject(fault, processes, infra, inputs, serial)
        finally:
            watcher.injecting = False
            watcher.last_change = time.monotonic()


PLANNER_INPUTS = (INVENTORY, READINESS, UPGRADE_RESULTS, OPERATOR_COMMANDS, RELEASE_TARGETS)


async def settled_lag(run: Seed) -> tuple[dict[str, int], dict[str, int]]:
    """The planner's and the executors' lag, once both are 0 or LAG_TIMEOUT_S has passed."""
    deadline = time.monotonic() + LAG_TIMEOUT_S
    while True:
        planner = await group_lag(run.bootstrap, run.prefix, run.planner_group, PLANNER_INPUTS)
        executors = await group_lag(run.bootstrap, run.prefix, run.executor_group, (STAGE_ADVANCE,))
        if (not planner and not executors) or time.monotonic() > deadline:
            return planner, executors
        await asyncio.sleep(1.0)


DEAD_LETTER_TIMEOUT_S = 60.0


async def missing_dead_letters(run: Seed, faults: list[Fault]) -> list[str]:
    """BUS-4: every bad record the schedule sent is on the dead-letter topic (by its ce_id), once
    its consumer has read it; waited for, as a restarted monitor reads its records late."""
    sent = {
        f"{rec_id}": topic
        for serial, fault in enumerate(faults)
        if fault.kind == "bad_records" and fault.fired_at is not None
        for rec_id, topic in ((dict(o.headers)["ce_id"].decode(), o.topic.name) for o in bad_records(run.seed, serial))
    }
    deadline = time.monotonic() + DEAD_LETTER_TIMEOUT_S
    while True:
        letters = {r.ce_id for r in await read_topic(run.bootstrap, run.prefix, DEAD_LETTER)}
        missing = sorted(set(sent) - letters)
        if not missing or time.monotonic() > deadline:
            return [f"BUS-4: bad record {m} on {sent[m]} was never dead-lettered" for m in missing[:10]]
        await asyncio.sleep(1.0)


# -- the test -------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(SEEDS))
async def test_a_rollout_survives_a_seeded_fault_schedule(
    seed: int, tmp_path: Path, chaos_infra: ChaosInfra, chaos_report: Report
) -> None:
    run = Seed(
        seed=seed,
        prefix=f"chaos-{seed}-{uuid.uuid4().hex[:6]}.",
        bootstrap=chaos_infra.bootstrap,
        redis_url=chaos_infra.redis_url,
        workdir=tmp_path,
        env=chaos_infra.env,
    )
    faults = schedule(seed, FAULTS_PER_SEED, INPUT_FAULTS_PER_SEED)
    processes = ChaosProcesses(
        workdir=tmp_path,
        base_env={
            "ROLLOUT_KAFKA_BOOTSTRAP": run.bootstrap,
            "ROLLOUT_REDIS_URL": run.redis_url,
            "ROLLOUT_TOPIC_PREFIX": run.prefix,
            "ROLLOUT_LOG_LEVEL": "INFO",
            **run.env,
        },
    )
    summary: dict[str, Any] = {"seed": seed, "prefix": run.prefix, "passed": False, "faults": []}
    findings: list[str] = []
    began = time.monotonic()
    tasks: list[asyncio.Task[None]] = []
    try:
        start_services(processes, run)  # the planner waits for the sequence that apply writes
        await asyncio.to_thread(apply_fleet, run)
        await wait_for_fleet(run, processes)
        watcher = Watcher(run)
        inputs = Inputs(run, InjectedFleet(stages=tuple(STAGES), version=OLD, stage_of=dict(STAGE_OF)), watcher)
        tasks.append(asyncio.create_task(watcher.follow()))
        await publish_release(
            run.bootstrap, run.prefix, event_id=RELEASE_ID, source="chaos-test", channel=CHANNEL, targets={"1.30": NEW}
        )
        released = time.monotonic()
        summary["setup_s"] = round(released - began, 1)
        injector = asyncio.create_task(run_faults(faults, watcher, processes, chaos_infra, inputs))
        tasks.append(injector)

        exits: list[str] = []
        deadline = time.monotonic() + COMPLETE_TIMEOUT_S
        while not (watcher.all_complete and injector.done()):
            # A process that ends by itself is a finding; it is started again, as an orchestrator would.
            for name, code in processes.unexpected_exits().items():
                exits.append(f"{name} exited by itself with code {code}")
                if sum(e.startswith(f"{name} ") for e in exits) == 1:  # a crash loop is one finding
                    tail = "\n".join(processes.log_tail(name, 8000).splitlines()[-14:])
                    findings.append(f"{name} exited by itself with code {code}:\n{tail}")
                processes.restart(name)
            if injector.done() and injector.exception() is not None:
                raise injector.exception()  # type: ignore[misc]
            quiet_s = 0.0 if watcher.injecting else time.monotonic() - watcher.last_change
            if time.monotonic() > deadline or quiet_s > STALL_S:
                why = f"stalled (nothing new for {quiet_s:.0f} s)" if quiet_s > STALL_S else "timed out"
                findings.append(
                    f"rollout {why} {time.monotonic() - released:.0f} s after the release: "
                    f"{len(watcher.succeeded)}/{EXPECTED_UPGRADES} upgrades succeeded, complete tracks "
                    f"{sorted(watcher.complete)}; planner's last wait: {last_wait(processes, tail_chars=200_000)}"
                )
                break
            await asyncio.sleep(0.2)
        summary["rollout_s"] = round(time.monotonic() - released, 1)
        summary["unexpected_exits"] = exits
        for name in sorted({e.split()[0] for e in exits}):
            if (times := sum(e.startswith(f"{name} ") for e in exits)) > 1:
                findings.append(f"{name} exited by itself {times} times in all")

        planner_lag, executor_lag = await settled_lag(run)
        summary["lag_planner"] = sum(planner_lag.values())
        summary["lag_executors"] = sum(executor_lag.values())
        if planner_lag:
            findings.append(f"planner group {run.planner_group} lag at the end: {planner_lag}")
        if executor_lag:
            findings.append(f"executor group {run.executor_group} lag at the end: {executor_lag}")

        result = audit(
            plans=stage_plans(STAGES),
            version=NEW,
            progress=await read_topic(run.bootstrap, run.prefix, PROGRESS),
            stage_advance=await read_topic(run.bootstrap, run.prefix, STAGE_ADVANCE),
            results=await read_topic(run.bootstrap, run.prefix, UPGRADE_RESULTS),
            readiness=await read_topic(run.bootstrap, run.prefix, READINESS),
            executor_kills={name: kills for name, kills in processes.kills.items() if name.startswith("executor")},
            lease_s=LEASE_S,
            completions=world_completions(run.workdir / WORLD_FILE),
        )
        findings.extend(result.findings)
        if result.final_stage_of != inputs.fleet.stage_of:
            differ = sorted(set(result.final_stage_of.items()) ^ set(inputs.fleet.stage_of.items()))
            findings.append(f"SEQ-6: the planner's notices end on another membership than was sent: {differ[:8]}")
        if inputs.sent_bad:
            findings.extend(await missing_dead_letters(run, faults))
        summary.update(
            completed=result.completed_tracks == len(STAGES) * len(TRACKS),
            completed_tracks=result.completed_tracks,
            upgrades_succeeded=result.succeeded_keys,
            duplicates=result.duplicates,
            completions=result.completions,
            reruns=result.reruns,
            explained_reruns=result.explained_reruns,
            observed_before_rerun=observed_before_rerun(tmp_path),
            missing=result.missing,
            batches=result.batches,
            oversize_batches=result.oversize_batches,
            gate1_violations=result.gate1_violations,
            gate3_violations=result.gate3_violations,
            batches_gate_checked=result.batches_gate_checked,
            gate1_checks=result.gate1_checks,
            gate3_checks=result.gate3_checks,
            peak_unavailable={key: list(peak) for key, peak in result.peak_unavailable.items()},
            timeline_samples=sum(len(samples) for samples in result.timeline.values()),
            decided_twice=result.decided_twice,
            membership_changes=result.membership_changes,
            inventory_changes=inputs.changes,
            removed=result.removed,
            bad_records_sent=inputs.sent_bad,
        )
    except BaseException as exc:
        findings.append(f"the run itself failed: {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}")
        raise
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        processes.kill_all()
        # a fault cut short by a failure must not leave the module's servers down for the next seed
        await asyncio.to_thread(chaos_infra.recover)
        summary["faults"] = [asdict(f) for f in faults]
        summary["wall_s"] = round(time.monotonic() - began, 1)
        summary["findings"] = findings
        summary["passed"] = not findings
        if findings and REPORT_PATH:
            # pytest keeps only the last few tmp dirs: the logs of a failed seed go next to the report
            kept = Path(REPORT_PATH).parent / "chaos-logs" / run.prefix.rstrip(".")
            shutil.copytree(tmp_path, kept, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*-data"))
            await _keep_planner_store(chaos_infra.redis_url, run.namespace, kept / "store")
            summary["logs"] = str(kept)
        chaos_report.runs.append(summary)
        chaos_report.write()

    assert not findings, f"seed {seed} ({run.prefix}), logs in {tmp_path}:\n" + "\n".join(findings)


def observed_before_rerun(workdir: Path) -> int:
    """Takeovers whose probe found the upgrade done by the executor that held the target before
    (the executors' logs say so once each): re-runs the probe avoided."""
    return sum(
        log.read_text(errors="replace").count("observed before re-run") for log in workdir.glob("executor-*.log")
    )


def _write_files(into: Path, files: dict[str, bytes]) -> None:
    into.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (into / name).write_bytes(data)


async def _keep_planner_store(url: str, namespace: str, into: Path) -> None:
    """The planner's stored state of a failed seed (status, checkpoint, snapshot, journal), to debug it."""
    client = aioredis.Redis.from_url(url)
    try:
        found: dict[str, bytes] = {}
        async for key in client.scan_iter(match=f"{namespace}:*"):
            value = await client.get(key)
            if value is not None:
                found[key.decode().replace("/", "_").replace(":", "_")] = value
        await asyncio.to_thread(_write_files, into, found)
    finally:
        await client.aclose()
