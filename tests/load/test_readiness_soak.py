"""A bounded soak: the planner of a 100,000-cluster fleet under steady readiness flapping.

The planner (`python -m rollout_planner.service`, its fleet from a scenario file) and two
executors run as processes on the real broker and Redis; a release starts a rollout of the one
stage. Then a plain aiokafka producer flips clusters' readiness at a steady rate for a fixed time
(`ROLLOUT_SOAK_SECONDS`, 60 s by default) while, every few seconds, the test samples

- the consumer lag of the planner's group on the readiness topic (end offsets - committed), and
- the planner's resident memory (VmRSS of /proc/<pid>/status).

It asserts that the lag stays bounded (never more than `MAX_LAG_S` seconds of events behind,
and drained soon after the flapping stops), that memory stays flat (after a warm-up, the last
third's peak within 15% of the first third's), and that the decisions stay right: no batch
larger than maxNew, no cluster handed out twice, and a status document whose counts add up to
the fleet and agree with what went over the wire.

Figures (rate sustained, lag, RSS) are printed, and written as JSON to `ROLLOUT_SOAK_REPORT` if
set. Knobs: `ROLLOUT_SOAK_SECONDS`, `ROLLOUT_SOAK_RATE` (events/s), `ROLLOUT_SOAK_CLUSTERS`,
`ROLLOUT_SOAK_POLL_MAX_RECORDS` (the planner's `ROLLOUT_POLL_MAX_RECORDS`).

Memory is judged twice, because the planner's peak comes from its full snapshot, written only
every so often (at most every 30 s by default), so a third of the run may hold none: the last
third's median (the resident baseline, which a leak raises) within 15% of the first third's, and
the last third's peak within 15% of the peak before it (after the warm-up, which spans at least
one snapshot).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
import yaml
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from rollout_common.topics.catalog import (
    INVENTORY,
    OPERATOR_COMMANDS,
    READINESS,
    RELEASE_TARGETS,
    STAGE_ADVANCE,
    UPGRADE_RESULTS,
    TopicDef,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

CLUSTERS = int(os.environ.get("ROLLOUT_SOAK_CLUSTERS", "100000"))
SOAK_S = float(os.environ.get("ROLLOUT_SOAK_SECONDS", "60"))
RATE = float(os.environ.get("ROLLOUT_SOAK_RATE", "2000"))  # readiness events per second
# The planner's own default unless set (its ROLLOUT_POLL_MAX_RECORDS).
POLL_MAX_RECORDS = os.environ.get("ROLLOUT_SOAK_POLL_MAX_RECORDS")
MAX_NEW = 50
MAX_UNAVAILABLE = "3%"
DOWN_S = 1.0  # a flapping cluster is not ready for this long
READY_AFTER_S = 10.0  # an upgraded cluster reports ready this long after its upgrade succeeded
SAMPLE_EVERY_S = 3.0
RSS_EVERY_S = 0.25  # often enough to catch each batch's peak (a snapshot is built per batch)
WARM_UP_S = 15.0  # RSS before this is not judged: the first batches allocate what stays
RSS_GROWTH = 0.15
MAX_LAG_S = 15.0  # the planner may be at most this many seconds of events behind (a snapshot stalls it)
DRAIN_TIMEOUT_S = 60.0
# A snapshot and a status document of 100,000 clusters take seconds each on a loaded core.
STATUS_TIMEOUT_S = 120.0
START_TIMEOUT_S = 90.0
OLD = "1.30.5-gke.1000"
NEW = "1.31.13-gke.1023000"
INPUTS: tuple[TopicDef, ...] = (INVENTORY, READINESS, UPGRADE_RESULTS, OPERATOR_COMMANDS, RELEASE_TARGETS)


def cluster_name(i: int) -> str:
    return f"c-{i:06d}"


def scenario_document() -> dict[str, Any]:
    return {
        "name": "soak",
        "generate": [{"count": CLUSTERS, "name": "c-{i:06d}", "labels": {"env": "prod"}, "version": OLD}],
        "sequence": {
            "name": "soak",
            "channel": "regular",
            "stages": [
                {
                    "name": "prod",
                    "clusterSelector": {"matchLabels": {"env": "prod"}},
                    "soak": "1h",
                    # Room for the flapping clusters down at any time (rate x DOWN_S / 2) and for
                    # upgrades beside them.
                    "rolloutStrategy": {"maxNew": MAX_NEW, "maxUnavailable": MAX_UNAVAILABLE},
                }
            ],
        },
    }


@dataclass
class Sample:
    at_s: float  # since the flapping started
    produced: int
    lag: int  # readiness records not yet committed by the planner's group
    rss_kib: int  # the peak since the previous sample
    batch: int  # the planner's last persisted batch


@dataclass
class SoakReport:
    clusters: int
    seconds: float
    target_rate: float
    poll_max_records: str | None
    produced: int = 0
    produced_rate: float = 0.0  # events/s the producer sustained
    consumed_rate: float = 0.0  # events/s the planner committed, over the flapping
    max_lag: int = 0
    max_lag_s: float = 0.0  # max lag / rate: how far behind, in seconds of events
    drain_s: float = 0.0  # after the flapping stopped, until lag 0
    rss_first_third_median_kib: int = 0
    rss_last_third_median_kib: int = 0
    rss_before_last_third_max_kib: int = 0
    rss_last_third_max_kib: int = 0
    max_down: int = 0  # clusters flapped down at once
    stage_advances: int = 0
    batches: int = 0
    samples: list[Sample] = field(default_factory=list)


class Service:
    """A service as an OS process (`python -m module`), logging to a file."""

    def __init__(self, log: Path, module: str, env: dict[str, str]) -> None:
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", module],
                env=os.environ | env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.log = log

    def rss_kib(self) -> int:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1])

    def check_running(self) -> None:
        code = self.process.poll()
        assert code is None, f"{self.log.stem} exited with {code}:\n{self.log.read_text(errors='replace')[-3000:]}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(5)


@pytest.fixture
def prefix(topic_prefix: str) -> str:
    return topic_prefix + "."


@pytest.fixture
def system(
    tmp_path: Path, kafka_bootstrap: str, redis_url: str, prefix: str
) -> Iterator[tuple[Service, list[Service]]]:
    """The planner and two executors with a fast simulated driver, so that the rollout moves."""
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(yaml.safe_dump(scenario_document()))
    common = {
        "ROLLOUT_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "ROLLOUT_REDIS_URL": redis_url,
        "ROLLOUT_TOPIC_PREFIX": prefix,
        "ROLLOUT_LOG_LEVEL": "WARNING",
    }
    planner = Service(
        tmp_path / "planner.log",
        "rollout_planner.service",
        common
        | {
            "ROLLOUT_REDIS_NAMESPACE": prefix,
            "ROLLOUT_PLANNER_GROUP": f"{prefix}planner",
            "ROLLOUT_SCENARIO_FILE": str(fleet),
            "ROLLOUT_POLL_TIMEOUT_S": "0.2",
            "ROLLOUT_HTTP_PORT": "0",
        }
        | ({"ROLLOUT_POLL_MAX_RECORDS": POLL_MAX_RECORDS} if POLL_MAX_RECORDS else {}),
    )
    executors: list[Service] = []
    try:
        for number in range(2):
            executors.append(
                Service(
                    tmp_path / f"executor-{number}.log",
                    "rollout_executor",
                    common
                    | {
                        "ROLLOUT_EXECUTOR_ID": f"executor-{number}",
                        "ROLLOUT_GROUP_ID": f"{prefix}executors",
                        "ROLLOUT_REDIS_NAMESPACE": f"{prefix}executors",
                        "ROLLOUT_DRIVER": "simulated",
                        "ROLLOUT_SIMULATED__DURATIONS_S": json.dumps({"controlPlane": 0.05, "nodes": 0.05}),
                        "ROLLOUT_MAX_CONCURRENT_UPGRADES": str(MAX_NEW),
                        "ROLLOUT_METRICS_PORT": "0",
                    },
                )
            )
        yield planner, executors
    finally:
        for process in [*executors, planner]:
            process.stop()


async def status_document(redis_url: str, prefix: str) -> dict[str, Any] | None:
    client = aioredis.Redis.from_url(redis_url)
    try:
        raw = await client.get(f"{prefix}:status")
    finally:
        await client.aclose()
    return None if raw is None else json.loads(raw)  # type: ignore[no-any-return]


def headers(kind: str, event_id: str) -> list[tuple[str, bytes]]:
    return [
        ("ce_specversion", b"1.0"),
        ("ce_id", event_id.encode()),
        ("ce_source", b"soak-test"),
        ("ce_type", f"io.rollout.{kind}.v1".encode()),
        ("content-type", b"application/json"),
    ]


async def start_rollout(producer: AIOKafkaProducer, prefix: str) -> None:
    body = {"eventId": "rel-soak", "channel": "regular", "targets": {"1.30": NEW}}
    await producer.send_and_wait(
        prefix + RELEASE_TARGETS.name,
        json.dumps(body).encode(),
        key=b"regular",
        headers=headers("release_target", "rel-soak"),
    )


async def wait_for_rollout(redis_url: str, prefix: str, planner: Service) -> None:
    async with asyncio.timeout(START_TIMEOUT_S):
        while True:
            planner.check_running()
            status = await status_document(redis_url, prefix)
            if status is not None and status["clusters"] == CLUSTERS and status["rollouts"]:
                return
            await asyncio.sleep(0.5)


class LagMeter:
    """End offsets (a group-less consumer) minus the planner group's committed offsets."""

    def __init__(self, kafka_bootstrap: str, prefix: str) -> None:
        self._group = f"{prefix}planner"
        self._admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        self._consumer = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, enable_auto_commit=False)
        self._inputs = [TopicPartition(prefix + t.name, p) for t in INPUTS for p in range(t.partitions)]
        self.readiness = {tp for tp in self._inputs if tp.topic == prefix + READINESS.name}

    async def __aenter__(self) -> LagMeter:
        await self._admin.start()
        await self._consumer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._consumer.stop()
        await self._admin.close()

    async def lag(self, partitions: set[TopicPartition] | None = None) -> int:
        wanted = partitions if partitions is not None else set(self._inputs)
        ends = await self._consumer.end_offsets(list(wanted))
        committed = await self._admin.list_consumer_group_offsets(self._group)
        done = {tp: meta.offset for tp, meta in committed.items() if meta.offset >= 0}
        return sum(end - done.get(tp, 0) for tp, end in ends.items())

    async def committed(self, partitions: set[TopicPartition]) -> int:
        committed = await self._admin.list_consumer_group_offsets(self._group)
        return sum(meta.offset for tp, meta in committed.items() if tp in partitions and meta.offset > 0)


class Flapper:
    """Readiness at a steady `rate` (events/s), as a health service of a flapping fleet would send it.

    Each second, in this order: clusters that went down `DOWN_S` ago come back (ready), clusters
    whose upgrade succeeded `READY_AFTER_S` ago report ready (GATE-1: an upgraded cluster is
    unavailable until a ready arrives after its upgrade; sent at once, it could share the planner's
    poll batch with the result and be applied before it, as the planner applies readiness first),
    and random other clusters go down (not ready) with the rest of the second's budget.
    """

    def __init__(self, producer: AIOKafkaProducer, prefix: str, rate: float) -> None:
        self._producer = producer
        self._topic = prefix + READINESS.name
        self._rate = rate
        self._rng = random.Random(7)
        self._down: dict[str, float] = {}  # name -> when it comes back (monotonic)
        self.upgraded: collections.deque[tuple[float, str]] = collections.deque()  # (when ready, name)
        self.sent = 0
        self.max_down = 0

    async def run(self, seconds: float) -> None:
        started = time.monotonic()
        pending: list[asyncio.Future[Any]] = []
        while (elapsed := (now := time.monotonic()) - started) < seconds:
            budget = int(elapsed * self._rate) - self.sent
            back = [name for name, at in self._down.items() if at <= now][:budget]
            for name in back:
                del self._down[name]
                pending.append(await self._send(name, ready=True))
            while len(back) < budget and self.upgraded and self.upgraded[0][0] <= now:
                back.append(name := self.upgraded.popleft()[1])
                pending.append(await self._send(name, ready=True))
            for _ in range(budget - len(back)):
                name = cluster_name(self._rng.randrange(CLUSTERS) + 1)
                if name not in self._down:
                    self._down[name] = now + DOWN_S
                pending.append(await self._send(name, ready=name not in self._down))
            self.max_down = max(self.max_down, len(self._down))
            if len(pending) > 20000:
                await asyncio.gather(*pending)
                pending.clear()
            await asyncio.sleep(0.02)
        await asyncio.gather(*pending)

    async def _send(self, name: str, *, ready: bool) -> asyncio.Future[Any]:
        body = {"cluster": name, "ready": ready, "reason": None if ready else "flapping"}
        self.sent += 1
        return await self._producer.send(
            self._topic, json.dumps(body).encode(), key=name.encode(), headers=headers("readiness", f"flap-{self.sent}")
        )


async def current_status(redis_url: str, prefix: str, meter: LagMeter) -> None:
    """Until the status document describes the last batch. The planner rebuilds it at most every
    so often while events stream in (a walk over 100,000 clusters), and brings it up to date once
    it has nothing left to decide: no event is sent here, since each one would start a new batch
    for the document to catch up with."""
    client = aioredis.Redis.from_url(redis_url)
    try:
        async with asyncio.timeout(STATUS_TIMEOUT_S):
            while True:
                checkpoint = json.loads(await client.get(f"{prefix}:planner/checkpoint") or b"{}")
                status = json.loads(await client.get(f"{prefix}:status") or b"{}")
                if status.get("batch") == checkpoint.get("batch") and await meter.lag() == 0:
                    return
                await asyncio.sleep(0.5)
    finally:
        await client.aclose()


async def sample_rss(planner: Service, started: float, into: list[tuple[float, int]]) -> None:
    """The planner's VmRSS every `RSS_EVERY_S`, until cancelled."""
    while True:
        into.append((time.monotonic() - started, planner.rss_kib()))
        await asyncio.sleep(RSS_EVERY_S)


async def follow_upgrades(kafka_bootstrap: str, prefix: str, flapper: Flapper) -> None:
    """Feed the flapper the clusters whose upgrade succeeded, until cancelled."""
    topic = prefix + UPGRADE_RESULTS.name
    consumer = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        assigned = [TopicPartition(topic, p) for p in range(UPGRADE_RESULTS.partitions)]
        consumer.assign(assigned)
        await consumer.seek_to_beginning(*assigned)
        while True:
            for batch in (await consumer.getmany(timeout_ms=200)).values():
                for record in batch:
                    result = json.loads(record.value)
                    if result["outcome"] == "succeeded":
                        flapper.upgraded.append((time.monotonic() + READY_AFTER_S, result["cluster"]))
    finally:
        await consumer.stop()


async def read_all(kafka_bootstrap: str, topic: str, partitions: int) -> list[dict[str, Any]]:
    """Every record of `topic` up to its end offsets now, as JSON bodies."""
    consumer = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        assigned = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(assigned)
        await consumer.seek_to_beginning(*assigned)
        ends = await consumer.end_offsets(assigned)
        bodies: list[dict[str, Any]] = []
        async with asyncio.timeout(60):
            while any([await consumer.position(tp) < end for tp, end in ends.items()]):
                for batch in (await consumer.getmany(timeout_ms=500, max_records=5000)).values():
                    bodies.extend(json.loads(r.value) for r in batch)
        return bodies
    finally:
        await consumer.stop()


def write_report(report: SoakReport) -> None:
    if path := os.environ.get("ROLLOUT_SOAK_REPORT"):
        Path(path).write_text(json.dumps(asdict(report), indent=2))


async def test_planner_keeps_up_with_readiness_flapping_across_a_large_fleet(
    kafka_bootstrap: str, redis_url: str, prefix: str, system: tuple[Service, list[Service]]
) -> None:
    planner, executors = system
    report = SoakReport(clusters=CLUSTERS, seconds=SOAK_S, target_rate=RATE, poll_max_records=POLL_MAX_RECORDS)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, linger_ms=20, max_batch_size=256 * 1024)
    await producer.start()
    try:
        # The planner creates the topics at start; the release waits for them.
        async with asyncio.timeout(START_TIMEOUT_S):
            while True:
                planner.check_running()
                admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
                await admin.start()
                try:
                    if prefix + READINESS.name in await admin.list_topics():
                        break
                finally:
                    await admin.close()
                await asyncio.sleep(0.5)
        await start_rollout(producer, prefix)
        await wait_for_rollout(redis_url, prefix, planner)

        async with LagMeter(kafka_bootstrap, prefix) as meter:
            flapper = Flapper(producer, prefix, RATE)
            following = asyncio.create_task(follow_upgrades(kafka_bootstrap, prefix, flapper))
            started = time.monotonic()
            flapping = asyncio.create_task(flapper.run(SOAK_S))
            rss: list[tuple[float, int]] = []  # (seconds since the start, VmRSS KiB)
            sampling = asyncio.create_task(sample_rss(planner, started, rss))
            committed_before = await meter.committed(meter.readiness)
            while not flapping.done():
                await asyncio.wait([flapping], timeout=SAMPLE_EVERY_S)
                planner.check_running()
                since = report.samples[-1].at_s if report.samples else 0.0
                sample = Sample(
                    at_s=round(time.monotonic() - started, 1),
                    produced=flapper.sent,
                    lag=await meter.lag(meter.readiness),
                    rss_kib=max([kib for at, kib in rss if at > since] or [planner.rss_kib()]),
                    batch=(await status_document(redis_url, prefix) or {}).get("batch", 0),
                )
                report.samples.append(sample)
                print(f"soak: {sample}", flush=True)
            await flapping  # re-raises a producer error
            for task in (following, sampling):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            flapped_s = time.monotonic() - started
            report.produced = flapper.sent
            report.produced_rate = round(flapper.sent / flapped_s, 1)
            report.max_down = flapper.max_down
            report.consumed_rate = round((await meter.committed(meter.readiness) - committed_before) / flapped_s, 1)

            # Stop upgrading, then let the planner take in everything that was sent.
            for executor in executors:
                executor.stop()
            drain_started = time.monotonic()
            async with asyncio.timeout(DRAIN_TIMEOUT_S):
                while await meter.lag() > 0:
                    planner.check_running()
                    await asyncio.sleep(0.5)
            report.drain_s = round(time.monotonic() - drain_started, 1)
            await current_status(redis_url, prefix, meter)
    finally:
        await producer.stop()

    lags = [s.lag for s in report.samples]
    report.max_lag = max(lags)
    report.max_lag_s = round(report.max_lag / RATE, 1)
    judged = [kib for at, kib in rss if at >= WARM_UP_S]
    third = max(1, len(judged) // 3)
    report.rss_first_third_median_kib = int(statistics.median(judged[:third]))
    report.rss_last_third_median_kib = int(statistics.median(judged[-third:]))
    report.rss_before_last_third_max_kib = max(judged[:-third])
    report.rss_last_third_max_kib = max(judged[-third:])

    # Decisions: batches within maxNew, each cluster and track in one batch only, and a status
    # document that adds up and agrees with the wire.
    advances = await read_all(kafka_bootstrap, prefix + STAGE_ADVANCE.name, STAGE_ADVANCE.partitions)
    results = await read_all(kafka_bootstrap, prefix + UPGRADE_RESULTS.name, UPGRADE_RESULTS.partitions)
    status = await status_document(redis_url, prefix)
    assert status is not None
    report.stage_advances = len(advances)
    report.batches = status["batch"]
    figures = {k: v for k, v in asdict(report).items() if k != "samples"}
    print(f"soak figures: {json.dumps(figures)}", flush=True)
    write_report(report)

    assert report.produced_rate >= 0.95 * RATE, "the test's producer fell behind; the figures mean nothing"
    assert report.max_lag <= MAX_LAG_S * RATE, f"the planner fell {report.max_lag_s}s of events behind"
    assert report.rss_last_third_median_kib <= (1 + RSS_GROWTH) * report.rss_first_third_median_kib, (
        f"planner RSS baseline grew from {report.rss_first_third_median_kib} to {report.rss_last_third_median_kib} KiB"
    )
    assert report.rss_last_third_max_kib <= (1 + RSS_GROWTH) * report.rss_before_last_third_max_kib, (
        f"planner RSS peak grew from {report.rss_before_last_third_max_kib} to {report.rss_last_third_max_kib} KiB"
    )

    handed_out: dict[str, set[str]] = defaultdict(set)  # track -> clusters
    commands: dict[tuple[str, str], set[str]] = defaultdict(set)
    for advance in advances:
        assert len(advance["clusters"]) <= MAX_NEW, f"{advance['commandId']} breaches maxNew"
        assert advance["version"] == NEW
        handed_out[advance["track"]].update(advance["clusters"])
        for cluster in advance["clusters"]:
            commands[(cluster, advance["track"])].add(advance["commandId"])
    assert advances, "no stage advance during the soak"
    assert {key: ids for key, ids in commands.items() if len(ids) > 1} == {}, "a cluster in two batches"

    succeeded: dict[str, set[str]] = defaultdict(set)
    for result in results:
        if result["outcome"] == "succeeded":
            succeeded[result["track"]].add(result["cluster"])
    (stage,) = status["stages"]
    assert status["clusters"] == stage["clusters"] == CLUSTERS
    for track, view in stage["tracks"].items():
        counts = view["counts"]
        assert sum(counts.values()) == CLUSTERS, (track, counts)
        assert succeeded[track] <= handed_out[track]
        print(f"soak: {track}: handed out {len(handed_out[track])}, succeeded {len(succeeded[track])}, counts {counts}")
        # Every cluster the planner heard succeed is upgraded in its view (COMPLETE, or NOT_READY
        # until its ready arrives); every other one it handed out is still in progress (the
        # executors were stopped mid-batch); the rest it has not touched.
        assert counts.get("COMPLETE", 0) + counts.get("NOT_READY", 0) == len(succeeded[track]), (track, counts)
        assert counts.get("IN_PROGRESS", 0) == len(handed_out[track] - succeeded[track]), (track, counts)
        untouched = CLUSTERS - len(handed_out[track])
        assert counts.get("PENDING", 0) + counts.get("OUT_OF_SYNC", 0) == untouched, (track, counts)
    spread = statistics.pstdev(lags) if len(lags) > 1 else 0.0
    print(f"soak: lag mean {statistics.mean(lags):.0f}, stdev {spread:.0f}")
