"""A sustained run through the real health path: heartbeats -> monitor workers -> planner, with a rollout on.

N `python -m rollout_health monitor` processes share the heartbeats topic; one planner
(`python -m rollout_planner.service`, its fleet from a scenario file of `rate x interval` clusters)
has a rollout in progress. This process stands in for the fleet's reporters: every cluster beats
once per `--interval` seconds (round robin), so the topic carries `--rate` heartbeats a second
for `--seconds`. One heartbeat in `--flip-every` says the opposite of its cluster's last one, so
the monitors turn it into a readiness change; every other heartbeat changes nothing.

Before the clock starts every cluster's first heartbeat is sent and turned into readiness, the
release target starts the rollout (its first stage-advance is awaited), and the monitors work off
the backlog of that warm-up until no heartbeat produced more than `CAUGHT_UP_S` before is left
uncommitted, the fleet beating round robin at `--rate` all the while (no flips): the run measures
a fleet that is already known and a monitor that keeps up with it, at rest but for the flips. (The
warm-up sends 300,000 first heartbeats at once, where a real fleet's reporters come up over
minutes; how long the catch-up took is in the result, `catch_up_s`.) The monitors republish nothing
(`republish_interval_s` 0), so every readiness record is a change or a stale mark.

Figures, each p50 / p99 / max in seconds:

- heartbeat lag: a heartbeat's production to the monitors' group committing past it. Sampled
  every `SAMPLE_EVERY_S` as the age of the oldest heartbeat not yet committed; faust commits on a
  timer (about 2.8 s), so this is an upper bound of when a monitor took the heartbeat in.
- readiness lag: a flipping heartbeat's production to its readiness record (the record's
  timestamp, set by the monitor's producer on this machine's clock).
- decision lag: a readiness record to the planner's group committing past it, which it does only
  after deciding on it and persisting the decision (BUS-6); sampled every `SAMPLE_EVERY_S`.

False stale: stale marks ("stale: ...") of a cluster whose newest heartbeat produced by the time
the mark speaks of (its `observedAt`: a worker behind on its partitions judges silence as of the
time it has read them to) was produced less than the staleness limit before it. The limit is 0.
Every cluster beats every `--interval` seconds, well within the limit.

    python -m bench.soak_health --rate 10000 --seconds 300 --workers 4 --json
"""

from __future__ import annotations

import argparse
import array
import asyncio
import collections
import datetime as dt
import json
import math
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from bench.fleet_reporters import BatchedSender, heartbeat_record
from bench.health_scaling import APP_ID, _tree_cpu_s
from bench.kafka_common import Services, enveloped, fresh_prefix, group_stable, infrastructure, load_average, percentile
from bench.soak_health_waits import Progress, StalledError, committed, end_offsets, progress, until
from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.memory_bus import kafka_partition
from rollout_common.events import ReleaseTarget
from rollout_common.topics import ALL
from rollout_common.topics.catalog import HEARTBEATS, READINESS, RELEASE_TARGETS, STAGE_ADVANCE

OLD = "1.30.5-gke.1000"
NEW = "1.31.13-gke.1023000"
STALENESS_LIMIT_S = 90.0  # the monitor's default
# Heartbeats remembered per cluster for judging a stale mark: 16 at a 30 s interval reach 8 minutes
# back, more than a worker ever judges behind (the staleness limit) plus the readiness lag.
BEATS_KEPT = 16
SAMPLE_EVERY_S = 0.2
# Caught up: every heartbeat older than this committed by the monitors (faust commits about every 2.8 s).
CAUGHT_UP_S = 5.0
STRETCH_S = 30.0  # the result's lags by stretch of the run
TICK_S = 0.02  # the producer tops up its budget this often
LIMIT_READINESS_P99_S = 2.0  # issue 21's limit at 10,000 heartbeats/s
LIMIT_RATE = 10_000.0
LIMIT_MONITOR_AT_REST_US = 50.0  # issue 21: monitor CPU per heartbeat that changes nothing


@dataclass(frozen=True)
class Bounds:
    """How long each wait of the run may take. Past `start_s` or the warm-up's bound the run fails,
    saying what it saw; past `drain_s` it ends, and its figures say what was left behind."""

    start_s: float = 180.0  # each service's group formed; the rollout's first stage-advance
    warm_up_s: float = 60.0  # every cluster's first readiness, plus `warm_up_s_per_cluster` each
    warm_up_s_per_cluster: float = 0.003  # 300,000 clusters: 960 s
    drain_s: float = 180.0

    def warm_up(self, clusters: int) -> float:
        return self.warm_up_s + clusters * self.warm_up_s_per_cluster


@dataclass(frozen=True)
class _Setup:
    """What every step of a run needs: where it runs and how long it may wait."""

    bootstrap: str
    prefix: str
    partitions: int
    services: Services
    bounds: Bounds

    async def progress(self) -> Progress:
        return await progress(self.bootstrap, self.prefix, heartbeat_partitions=self.partitions)

    async def until(self, condition: Callable[[], Awaitable[bool]], *, timeout_s: float, what: str) -> None:
        await until(condition, timeout_s=timeout_s, what=what, services=self.services, seen=self.progress)


@dataclass
class Lag:
    count: int
    p50_s: float
    p99_s: float
    max_s: float

    @staticmethod
    def of(values: list[float]) -> Lag:
        ordered = sorted(values)
        return Lag(
            count=len(ordered),
            p50_s=round(percentile(ordered, 0.50), 3),
            p99_s=round(percentile(ordered, 0.99), 3),
            max_s=round(ordered[-1], 3) if ordered else float("nan"),
        )


@dataclass
class SoakHealthResult:
    target_rate: float
    seconds: float
    clusters: int
    interval_s: float
    workers: int
    partitions: int
    flip_every: int
    produced: int
    produced_rate: float
    readiness_changes_sent: int
    readiness_changes_seen: int
    stale_marks: int
    false_stale: int
    # after the drain (DRAIN_TIMEOUT_S at most): what never arrived, so lags of a run that fell
    # behind are not read as if complete
    heartbeats_uncommitted: int
    readiness_undecided: int
    heartbeat_lag: Lag
    readiness_lag: Lag
    decision_lag: Lag
    stage_advances: int
    cpu_s: dict[str, float]
    warm_up_s: float
    drain_s: float
    load: str
    # of `warm_up_s`: from the rollout's start until the monitors had worked off the warm-up's backlog
    catch_up_s: float = 0.0
    # where the run stood when the drain ran out ("" when it drained): which side stopped
    stalled: str = ""
    readiness_changes_absorbed: int = 0  # flips to not ready of a cluster a stale mark made not ready
    # per `STRETCH_S` of the run, from its start: the heartbeat lag's largest sample, and the p99 of
    # the readiness lags of the flips produced in it (which stretch a lag belongs to)
    heartbeat_lag_max_by_stretch: list[float] = field(default_factory=list)
    readiness_lag_p99_by_stretch: list[float] = field(default_factory=list)


@dataclass
class _Tracker:
    """What the measuring tasks share: send times, readiness seen, and the lags found."""

    # cluster -> its flips whose readiness has not come yet, oldest first: (produced at, to ready).
    # A cluster flips again each round (every `--interval`), before the last flip's readiness
    # comes when the monitors are that far behind.
    flips: dict[str, list[tuple[float, bool]]] = field(default_factory=dict)
    # cluster -> when its newest heartbeats were produced (`BEATS_KEPT`), oldest first
    beats_of: dict[str, array.array[float]] = field(default_factory=dict)
    # heartbeats partition -> (offset, produced at) not yet committed by the monitors
    beats: dict[int, collections.deque[tuple[int, float]]] = field(
        default_factory=lambda: collections.defaultdict(collections.deque)
    )
    # readiness partition -> (offset, record time) not yet committed by the planner
    readiness: dict[int, collections.deque[tuple[int, float]]] = field(
        default_factory=lambda: collections.defaultdict(collections.deque)
    )
    heartbeat_lags: list[float] = field(default_factory=list)
    readiness_lags: list[float] = field(default_factory=list)
    # the same lags with when they were sampled / when their flip was produced
    heartbeat_lags_at: list[tuple[float, float]] = field(default_factory=list)
    readiness_lags_at: list[tuple[float, float]] = field(default_factory=list)
    decision_lags: list[float] = field(default_factory=list)
    changes_seen: int = 0
    stale_marks: int = 0
    false_stale: int = 0
    sent: int = 0
    flips_sent: int = 0

    flips_absorbed: int = 0  # flips to not ready that a stale mark of their cluster made moot

    def sent_beat(self, partition: int, offset: int, at: float) -> None:
        """A heartbeat produced at `at` is at `offset` of `partition`: awaited until the monitors commit past it."""
        self.beats[partition].append((offset, at))

    def beat(self, cluster: str, at: float) -> None:
        beats = self.beats_of.get(cluster)
        if beats is None:
            beats = self.beats_of[cluster] = array.array("d")
        beats.append(at)
        if len(beats) > BEATS_KEPT:
            del beats[0]

    def flip(self, cluster: str, at: float, *, ready: bool) -> None:
        self.flips.setdefault(cluster, []).append((at, ready))
        self.flips_sent += 1

    def oldest_flip(self, cluster: str, *, to_ready: bool | None = None) -> float | None:
        """Take the cluster's oldest pending flip (only if it is to `to_ready`, when given)."""
        pending = self.flips.get(cluster)
        if not pending or (to_ready is not None and pending[0][1] != to_ready):
            return None
        at, _ = pending.pop(0)
        if not pending:
            del self.flips[cluster]
        return at


def cluster_name(i: int) -> str:
    return f"h-{i:07d}"


def scenario(clusters: int) -> dict[str, Any]:
    return {
        "name": "soak-health",
        "generate": [{"count": clusters, "name": "h-{i:07d}", "labels": {"env": "prod"}, "version": OLD}],
        "sequence": {
            "name": "soak-health",
            "channel": "regular",
            "stages": [
                {
                    "name": "prod",
                    "clusterSelector": {"matchLabels": {"env": "prod"}},
                    "soak": "1h",
                    "rolloutStrategy": {"maxNew": 50, "maxUnavailable": "10%"},
                }
            ],
        },
    }


async def _produce(
    producer: AIOKafkaProducer,
    topic: str,
    tracker: _Tracker,
    *,
    fleet: _Fleet,
    rate: float,
    seconds: float,
    flip_every: int,
) -> tuple[float, int]:
    """Heartbeats at `rate` for `seconds`, round robin over the fleet from where the last call left
    it; one in `flip_every` (0: none) flips its cluster's readiness. Returns the seconds taken and
    the heartbeats sent."""
    sender = BatchedSender(producer, topic, sent=tracker.sent_beat)
    started = time.monotonic()
    sent_before = tracker.sent
    try:
        while (elapsed := time.monotonic() - started) < seconds:
            for _ in range(int(elapsed * rate) - (tracker.sent - sent_before)):
                index = tracker.sent % fleet.clusters
                name = cluster_name(index)
                tracker.sent += 1
                # counted from this call's first heartbeat: one in `flip_every` of the run's own
                flip = flip_every > 0 and (tracker.sent - sent_before) % flip_every == 0
                if flip:
                    fleet.ready[index] = not fleet.ready[index]
                at = time.time()
                key, value, headers = heartbeat_record(
                    name, ready=fleet.ready[index], event_id=f"soak-{tracker.sent}", at=at, source="soak"
                )
                if flip:
                    tracker.flip(name, at, ready=fleet.ready[index])
                tracker.beat(name, at)
                await sender.add(key, value, headers, partition=fleet.partition[index], at=at)
            await sender.flush()
            if sender.in_flight > 1_000:
                await sender.settled()
            await asyncio.sleep(TICK_S)
    finally:
        await sender.settled()
    return time.monotonic() - started, tracker.sent - sent_before


@dataclass
class _Fleet:
    """Each cluster's readiness as its reporter last said it, and the partition of its heartbeats."""

    clusters: int
    partitions: int
    ready: list[bool] = field(init=False)
    partition: array.array[int] = field(init=False)

    def __post_init__(self) -> None:
        self.ready = [True] * self.clusters
        self.partition = array.array(
            "H", (kafka_partition(cluster_name(i).encode(), self.partitions) for i in range(self.clusters))
        )


async def _read_readiness(bootstrap: str, topic: str, tracker: _Tracker, *, from_offsets: dict[int, int]) -> None:
    """Readiness records from `from_offsets` on, until cancelled: their lags and stale marks."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        parts = [TopicPartition(topic, p) for p in from_offsets]
        consumer.assign(parts)
        for tp in parts:
            consumer.seek(tp, from_offsets[tp.partition])
        while True:
            for tp, records in (await consumer.getmany(timeout_ms=200, max_records=5000)).items():
                for record in records:
                    _readiness_record(tracker, json.loads(record.value), tp.partition, record.offset, record.timestamp)
    finally:
        await consumer.stop()


def _readiness_record(tracker: _Tracker, body: dict[str, Any], partition: int, offset: int, timestamp_ms: int) -> None:
    at = timestamp_ms / 1000
    tracker.readiness[partition].append((offset, at))
    cluster = body["cluster"]
    if (body.get("reason") or "").startswith("stale"):
        tracker.stale_marks += 1
        judged_at = body.get("observedAt") or at
        produced = [beat for beat in tracker.beats_of.get(cluster, ()) if beat <= judged_at]
        if produced and judged_at - produced[-1] < STALENESS_LIMIT_S:
            tracker.false_stale += 1
        if tracker.oldest_flip(cluster, to_ready=False) is not None:
            # the cluster is not ready already: its flip to not ready will change nothing
            tracker.flips_absorbed += 1
        return
    flipped = tracker.oldest_flip(cluster)
    if flipped is not None:
        tracker.changes_seen += 1
        tracker.readiness_lags.append(at - flipped)
        tracker.readiness_lags_at.append((flipped, at - flipped))


async def _sample_commits(bootstrap: str, prefix: str, tracker: _Tracker) -> None:
    """Every `SAMPLE_EVERY_S` until cancelled: the monitors' and the planner's committed offsets."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        while True:
            monitors = await committed(admin, prefix + APP_ID, prefix + HEARTBEATS.name)
            planner = await committed(admin, prefix + "planner", prefix + READINESS.name)
            now = time.time()
            _committed_beats_dropped(tracker, monitors)
            for beats in tracker.beats.values():
                tracker.heartbeat_lags.append(now - beats[0][1] if beats else 0.0)
                tracker.heartbeat_lags_at.append((now, tracker.heartbeat_lags[-1]))
            for partition, records in tracker.readiness.items():
                while records and records[0][0] < planner.get(partition, 0):
                    tracker.decision_lags.append(now - records.popleft()[1])
            await asyncio.sleep(SAMPLE_EVERY_S)
    finally:
        await admin.close()


async def _read_known(bootstrap: str, topic: str, known: set[str]) -> None:
    """Until cancelled: every cluster with a readiness record from a heartbeat (not a stale mark)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        parts = [TopicPartition(topic, p) for p in range(READINESS.partitions)]
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        while True:
            for records in (await consumer.getmany(timeout_ms=200, max_records=5000)).values():
                for record in records:
                    body = json.loads(record.value)
                    if not (body.get("reason") or "").startswith("stale"):
                        known.add(body["cluster"])
    finally:
        await consumer.stop()


async def _first_heartbeats(producer: AIOKafkaProducer, setup: _Setup, tracker: _Tracker, fleet: _Fleet) -> None:
    """Every cluster's first heartbeat, as fast as the producer goes."""
    sender = BatchedSender(producer, setup.prefix + HEARTBEATS.name, sent=tracker.sent_beat)
    for index in range(fleet.clusters):
        at = time.time()
        name = cluster_name(index)
        key, value, headers = heartbeat_record(name, ready=True, event_id=f"soak-first-{index}", at=at, source="soak")
        tracker.beat(name, at)
        await sender.add(key, value, headers, partition=fleet.partition[index], at=at)
        if index % 5_000 == 4_999:
            await sender.settled()
    await sender.settled()


async def _all_known(setup: _Setup, clusters: int) -> None:
    """Until each cluster's readiness is on its topic. Counted by cluster, not by record: a stall
    lets the monitors mark clusters stale, and those marks are readiness records too."""
    known: set[str] = set()
    reader = asyncio.create_task(_read_known(setup.bootstrap, setup.prefix + READINESS.name, known))

    async def all_known() -> bool:
        if reader.done():
            reader.result()  # re-raises what stopped it
        return len(known) >= clusters

    async def seen() -> str:
        return f"{len(known):,} of {clusters:,} clusters known; {await setup.progress()}"

    try:
        await until(
            all_known,
            timeout_s=setup.bounds.warm_up(clusters),
            what="every cluster's first readiness",
            services=setup.services,
            seen=seen,
        )
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)


def _committed_beats_dropped(tracker: _Tracker, monitors: dict[int, int]) -> None:
    """Forget the heartbeats the monitors' group has committed past."""
    for partition, beats in tracker.beats.items():
        while beats and beats[0][0] < monitors.get(partition, 0):
            beats.popleft()


async def _monitors_caught_up(setup: _Setup, tracker: _Tracker, clusters: int) -> None:
    """Until the monitors have committed every heartbeat produced more than `CAUGHT_UP_S` ago."""
    admin = AIOKafkaAdminClient(bootstrap_servers=setup.bootstrap)
    await admin.start()

    async def caught_up() -> bool:
        _committed_beats_dropped(tracker, await committed(admin, setup.prefix + APP_ID, setup.prefix + HEARTBEATS.name))
        now = time.time()
        return all(not beats or now - beats[0][1] <= CAUGHT_UP_S for beats in tracker.beats.values())

    try:
        await setup.until(
            caught_up, timeout_s=setup.bounds.warm_up(clusters), what="the monitors caught up with the warm-up"
        )
    finally:
        await admin.close()


async def _start_rollout(producer: AIOKafkaProducer, setup: _Setup) -> None:
    release = ReleaseTarget(event_id=f"{setup.prefix}release", channel="regular", targets={"1.30": NEW})
    key, value, headers = enveloped(release, event_id=release.event_id, key="regular", source="platform-team")
    await producer.send_and_wait(setup.prefix + RELEASE_TARGETS.name, value, key=key, headers=list(headers.items()))

    async def advanced() -> bool:
        ends = await end_offsets(setup.bootstrap, setup.prefix + STAGE_ADVANCE.name, STAGE_ADVANCE.partitions)
        return sum(ends.values()) > 0

    await setup.until(advanced, timeout_s=setup.bounds.start_s, what="the rollout's first stage-advance")


async def _groups_formed(setup: _Setup, *, workers: int) -> None:
    """The planner's group and the monitors' each Stable with all their members."""
    for group, members in ((setup.prefix + "planner", 1), (setup.prefix + APP_ID, workers)):
        try:
            await group_stable(setup.bootstrap, group, members, timeout_s=setup.bounds.start_s)
        except TimeoutError:
            raise StalledError(
                f"soak-health: group {group} not Stable with {members} members within {setup.bounds.start_s:.0f} s; "
                f"seen: {await setup.progress()}"
            ) from None


def _start_services(services: Services, *, prefix: str, fleet: Path, workers: int, log_dir: Path) -> None:
    services.start(
        "planner",
        ["rollout_planner.service"],
        {
            "ROLLOUT_REDIS_NAMESPACE": prefix,
            "ROLLOUT_PLANNER_GROUP": prefix + "planner",
            "ROLLOUT_SCENARIO_FILE": str(fleet),
            "ROLLOUT_HTTP_PORT": "0",
            "ROLLOUT_POLL_TIMEOUT_S": "0.2",
        },
    )
    for number in range(workers):
        services.start(
            f"monitor-{number}",
            ["rollout_health", "monitor"],
            {
                "ROLLOUT_REPUBLISH_INTERVAL_S": "0",  # every readiness record is a change or a stale mark
                "ROLLOUT_STALENESS_LIMIT_S": str(STALENESS_LIMIT_S),
                "ROLLOUT_METRICS_PORT": "0",
                "ROLLOUT_DATA_DIR": str(log_dir / f"monitor-{number}-data"),
            },
        )


async def run_async(
    bootstrap: str,
    redis_url: str,
    log_dir: Path,
    *,
    rate: float,
    seconds: float,
    workers: int,
    interval_s: float = 30.0,
    flip_every: int = 100,
    partitions: int = HEARTBEATS.partitions,
    bounds: Bounds = Bounds(),
) -> SoakHealthResult:
    """The sustained run (see the module's docstring) against the given broker and Redis."""
    load_before = load_average()
    clusters = int(rate * interval_s)
    prefix = fresh_prefix("soakhealth")
    fleet = log_dir / "fleet.yaml"
    fleet.write_text(yaml.safe_dump(scenario(clusters)))
    bus = KafkaBus(bootstrap, client_id="soak-setup")
    try:
        await bus.ensure_topics(
            [HEARTBEATS.spec(prefix, partitions=partitions)] + [t.spec(prefix) for t in ALL if t is not HEARTBEATS]
        )
    finally:
        await bus.close()
    services = Services(
        log_dir,
        {
            "ROLLOUT_KAFKA_BOOTSTRAP": bootstrap,
            "ROLLOUT_REDIS_URL": redis_url,
            "ROLLOUT_TOPIC_PREFIX": prefix,
            "ROLLOUT_TOPIC_PARTITIONS": json.dumps({HEARTBEATS.name: partitions}),
            "ROLLOUT_LOG_LEVEL": "WARNING",
        },
    )
    setup = _Setup(bootstrap=bootstrap, prefix=prefix, partitions=partitions, services=services, bounds=bounds)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, max_batch_size=256 * 1024)
    tracker = _Tracker()
    reporters = _Fleet(clusters=clusters, partitions=partitions)
    tasks: list[asyncio.Task[None]] = []
    stalled = ""
    try:
        _start_services(services, prefix=prefix, fleet=fleet, workers=workers, log_dir=log_dir)
        await _groups_formed(setup, workers=workers)
        await producer.start()
        warm_started = time.monotonic()
        await _first_heartbeats(producer, setup, tracker, reporters)
        # The fleet keeps beating while the monitors learn it, no flips: a cluster silent from its
        # first heartbeat until the run's first round reached it would be stale, truly.
        keep_beating = asyncio.create_task(
            _produce(
                producer,
                prefix + HEARTBEATS.name,
                tracker,
                fleet=reporters,
                rate=rate,
                seconds=math.inf,
                flip_every=0,
            )
        )
        try:
            await _all_known(setup, clusters)
            await _start_rollout(producer, setup)
            catch_up_started = time.monotonic()
            await _monitors_caught_up(setup, tracker, clusters)
            catch_up_s = time.monotonic() - catch_up_started
        finally:
            keep_beating.cancel()
            await asyncio.gather(keep_beating, return_exceptions=True)
        warm_up_s = time.monotonic() - warm_started

        readiness_from = await end_offsets(bootstrap, prefix + READINESS.name, READINESS.partitions)
        tasks.append(
            asyncio.create_task(
                _read_readiness(bootstrap, prefix + READINESS.name, tracker, from_offsets=readiness_from)
            )
        )
        tasks.append(asyncio.create_task(_sample_commits(bootstrap, prefix, tracker)))
        cpu_before = _cpu_by_role(services)
        run_started = time.time()
        took_s, produced = await _produce(
            producer,
            prefix + HEARTBEATS.name,
            tracker,
            fleet=reporters,
            rate=rate,
            seconds=seconds,
            flip_every=flip_every,
        )
        cpu_after = _cpu_by_role(services)
        drain_started = time.monotonic()

        async def drained() -> bool:
            for task in tasks:
                if task.done():
                    task.result()  # re-raises what stopped a measuring task
            waiting = any(tracker.beats.values()) or any(tracker.readiness.values())
            return not tracker.flips and not waiting

        # A run the machine cannot carry may never drain: its figures still say how far behind it
        # was, and where it stood says which side stopped.
        try:
            await setup.until(drained, timeout_s=bounds.drain_s, what="the run's readiness decided")
        except StalledError as exc:
            stalled = str(exc)
        drain_s = time.monotonic() - drain_started
        advances = await end_offsets(bootstrap, prefix + STAGE_ADVANCE.name, STAGE_ADVANCE.partitions)
        stage_advances = sum(advances.values())
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await producer.stop()
        services.stop_all()
    return SoakHealthResult(
        target_rate=rate,
        seconds=seconds,
        clusters=clusters,
        interval_s=interval_s,
        workers=workers,
        partitions=partitions,
        flip_every=flip_every,
        produced=produced,
        produced_rate=round(produced / took_s, 1),
        readiness_changes_sent=tracker.flips_sent,
        readiness_changes_seen=tracker.changes_seen,
        readiness_changes_absorbed=tracker.flips_absorbed,
        stale_marks=tracker.stale_marks,
        false_stale=tracker.false_stale,
        heartbeats_uncommitted=sum(len(beats) for beats in tracker.beats.values()),
        readiness_undecided=sum(len(records) for records in tracker.readiness.values()),
        heartbeat_lag=Lag.of(tracker.heartbeat_lags),
        readiness_lag=Lag.of(tracker.readiness_lags),
        heartbeat_lag_max_by_stretch=_by_stretch(tracker.heartbeat_lags_at, run_started, seconds, max),
        readiness_lag_p99_by_stretch=_by_stretch(
            tracker.readiness_lags_at, run_started, seconds, lambda lags: percentile(sorted(lags), 0.99)
        ),
        decision_lag=Lag.of(tracker.decision_lags),
        stage_advances=stage_advances,
        cpu_s={role: round(cpu_after[role] - cpu_before[role], 1) for role in cpu_after},
        warm_up_s=round(warm_up_s, 1),
        catch_up_s=round(catch_up_s, 1),
        drain_s=round(drain_s, 1),
        load=f"{load_before} before, {load_average()} after",
        stalled=stalled,
    )


def _stretch_lines(result: SoakHealthResult) -> list[str]:
    """The lags by stretch of the run, where the run recorded them (runs before 2026-12-03 did not)."""
    if not result.heartbeat_lag_max_by_stretch:
        return []
    return [
        f"- By {STRETCH_S:g} s of the run: the heartbeat lag's largest sample "
        + ", ".join(f"{v:.1f}" for v in result.heartbeat_lag_max_by_stretch)
        + " s; the readiness lag's p99 of the flips produced in it "
        + ", ".join(f"{v:.1f}" for v in result.readiness_lag_p99_by_stretch)
        + " s."
    ]


def _by_stretch(
    lags_at: list[tuple[float, float]], started: float, seconds: float, summary: Callable[[list[float]], float]
) -> list[float]:
    """`summary` of the lags in each `STRETCH_S` of the run (nan where none), from `started`."""
    stretches: list[list[float]] = [[] for _ in range(max(1, math.ceil(seconds / STRETCH_S)))]
    for at, lag in lags_at:
        index = int((at - started) // STRETCH_S)
        if 0 <= index < len(stretches):
            stretches[index].append(lag)
    return [round(summary(lags), 3) if lags else float("nan") for lags in stretches]


def _cpu_by_role(services: Services) -> dict[str, float]:
    """CPU seconds of the planner, of the monitors (supervisors and their workers), and of this process."""
    monitors = Services(services.log_dir, {})
    monitors.running = {n: p for n, p in services.running.items() if n.startswith("monitor")}
    planner = Services(services.log_dir, {})
    planner.running = {n: p for n, p in services.running.items() if n == "planner"}
    return {"monitors": _tree_cpu_s(monitors), "planner": _tree_cpu_s(planner), "producer": time.process_time()}


def run(
    *,
    rate: float,
    seconds: float,
    workers: int,
    interval_s: float = 30.0,
    flip_every: int = 100,
    partitions: int = HEARTBEATS.partitions,
    bootstrap: str | None = None,
    redis_url: str | None = None,
) -> SoakHealthResult:
    with infrastructure(bootstrap, redis_url) as infra, tempfile.TemporaryDirectory(prefix="soak-health-") as tmp:
        return asyncio.run(
            run_async(
                infra.bootstrap,
                infra.redis_url,
                Path(tmp),
                rate=rate,
                seconds=seconds,
                workers=workers,
                interval_s=interval_s,
                flip_every=flip_every,
                partitions=partitions,
            )
        )


def table(result: SoakHealthResult) -> str:
    lines = [
        f"{result.produced_rate:,.0f} heartbeats/s sustained (target {result.target_rate:,.0f}) for "
        f"{result.seconds:.0f} s, {result.clusters:,} clusters, {result.workers} monitor workers",
        f"{'lag':<16}{'count':>9}{'p50 s':>9}{'p99 s':>9}{'max s':>9}",
    ]
    for name, lag in (
        ("heartbeat", result.heartbeat_lag),
        ("readiness", result.readiness_lag),
        ("decision", result.decision_lag),
    ):
        lines.append(f"{name:<16}{lag.count:>9}{lag.p50_s:>9.3f}{lag.p99_s:>9.3f}{lag.max_s:>9.3f}")
    verdict = "met" if result.readiness_lag.p99_s <= LIMIT_READINESS_P99_S and result.false_stale == 0 else "MISSED"
    lines.append(
        f"false stale {result.false_stale} (of {result.stale_marks} stale marks); readiness changes "
        f"{result.readiness_changes_seen}/{result.readiness_changes_sent} "
        f"({result.readiness_changes_absorbed} absorbed by a stale mark); left behind: "
        f"{result.heartbeats_uncommitted} heartbeats, {result.readiness_undecided} readiness; warm-up "
        f"{result.warm_up_s:g} s (catch-up {result.catch_up_s:g} s), drain {result.drain_s:g} s; readiness p99 limit "
        f"{LIMIT_READINESS_P99_S:g} s: {verdict}; CPU s {result.cpu_s}; load {result.load}"
    )
    if result.stalled:
        lines.append(result.stalled)
    return "\n".join(lines)


SECTION_TITLE = "## Sustained run through the health services (issue 21, item 5)"
_PAGE_ANCHORS = ("## Missed targets: where the time and memory go", "## Closing note")


def section(result: SoakHealthResult, *, when: str) -> list[str]:
    """The page section of one run: its figures beside the limit, and where the CPU went."""
    cores = {role: cpu / result.seconds for role, cpu in result.cpu_s.items()}
    per_beat_us = {role: cpu / max(result.produced, 1) * 1e6 for role, cpu in result.cpu_s.items()}
    at_target = sum(per_beat_us.values()) * LIMIT_RATE / 1e6
    met = result.readiness_lag.p99_s <= LIMIT_READINESS_P99_S and result.false_stale == 0
    held = result.produced_rate >= 0.95 * LIMIT_RATE
    rows = [
        f"| {name} | {lag.count:,} | {lag.p50_s:.3f} | {lag.p99_s:.3f} | {lag.max_s:.3f} |"
        for name, lag in (
            ("heartbeat (produced -> committed by the monitors)", result.heartbeat_lag),
            ("readiness (changing heartbeat -> readiness record)", result.readiness_lag),
            ("decision (readiness record -> committed by the planner)", result.decision_lag),
        )
    ]
    return [
        SECTION_TITLE,
        "",
        f"`make soak-health HEALTH_RATE={result.target_rate:g} HEALTH_SECONDS={result.seconds:g} "
        f"HEALTH_WORKERS={result.workers}` ({when}; load {result.load}): reporters' heartbeats at "
        f"{result.produced_rate:,.0f}/s for {result.seconds:g} s ({result.clusters:,} clusters, each every "
        f"{result.interval_s:g} s; one heartbeat in {result.flip_every} a "
        f"readiness change) through {result.workers} `rollout_health monitor` processes "
        f"({result.partitions} heartbeat partitions) to the planner, whose rollout was in progress "
        f"({result.stage_advances} stage-advances). `python -m bench.soak_health` says how each lag is taken.",
        "",
        "| lag | count | p50 s | p99 s | max s |",
        "|---|---:|---:|---:|---:|",
        *rows,
        "",
        f"- Readiness changes: {result.readiness_changes_seen:,} of {result.readiness_changes_sent:,} arrived "
        f"({result.readiness_changes_absorbed:,} more were flips to not ready of a cluster a stale mark had "
        "made not ready: they change nothing); "
        f"stale marks {result.stale_marks:,}, of them false (the cluster was beating) **{result.false_stale:,}**; "
        f"after a drain of {result.drain_s:g} s, {result.heartbeats_uncommitted:,} heartbeats were not yet "
        f"committed and {result.readiness_undecided:,} readiness records not yet decided.",
        f"- Limit (10,000 heartbeats/s for 5 min: readiness lag p99 <= {LIMIT_READINESS_P99_S:g} s, 0 false "
        f"stale): {'met' if met and held else 'not met'}"
        + (
            "."
            if held
            else f": this run was at {result.produced_rate:,.0f}/s, not {LIMIT_RATE:,.0f}/s (the limit stays)."
        ),
        f"- Before the clock: a warm-up of {result.warm_up_s:g} s (every cluster's first heartbeat and "
        f"readiness, the rollout started), of which {result.catch_up_s:g} s the monitors took to work off its "
        f"backlog: the clock starts once no heartbeat older than {CAUGHT_UP_S:g} s is left uncommitted.",
        *_stretch_lines(result),
        "- Where the CPU went over the run: "
        + ", ".join(
            f"{role} {result.cpu_s[role]:.1f} s ({cores[role]:.2f} cores, {per_beat_us[role]:.0f} µs per heartbeat)"
            for role in result.cpu_s
        )
        + " (each process's idle cost included)"
        + f". At {LIMIT_RATE:,.0f}/s the same work needs about {at_target:.1f} cores, against the 2 this "
        "machine shares with other work. The monitors' share is the one to shrink: nearly every heartbeat "
        f"here changes nothing, for which issue 21 asks <= {LIMIT_MONITOR_AT_REST_US:g} µs.",
        "",
    ]


def place(page: str, lines: list[str]) -> str:
    """`page` with its sustained-run section replaced by `lines`, or `lines` put before the notes."""
    text = page.splitlines()
    if SECTION_TITLE in text:
        first = text.index(SECTION_TITLE)
        end = next((i for i in range(first + 1, len(text)) if text[i].startswith("## ")), len(text))
        text[first:end] = lines
    else:
        at = next((text.index(anchor) for anchor in _PAGE_ANCHORS if anchor in text), len(text))
        text[at:at] = lines
    return "\n".join(text) + "\n"


def carry_over(old_page: str, new_page: str) -> str:
    """`new_page` with the sustained-run section of `old_page`, if it had one: `make bench` does not
    run it (5 minutes of the machine's whole CPU), so a page it rewrites keeps the last run's."""
    old = old_page.splitlines()
    if SECTION_TITLE not in old:
        return new_page
    first = old.index(SECTION_TITLE)
    end = next((i for i in range(first + 1, len(old)) if old[i].startswith("## ")), len(old))
    return place(new_page, old[first:end])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=10_000.0, help="heartbeats per second")
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--workers", type=int, default=HEARTBEATS.partitions, help="monitor processes")
    parser.add_argument("--interval", type=float, default=30.0, help="each cluster's heartbeat interval, s")
    parser.add_argument("--flip-every", type=int, default=100, help="one heartbeat in this many changes readiness")
    parser.add_argument("--partitions", type=int, default=HEARTBEATS.partitions, help="of the heartbeats topic")
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--redis-url", default=None)
    parser.add_argument("--json", action="store_true", help="the JSON only, without the table")
    parser.add_argument("--page", type=Path, default=None, help="put the run's section into this page")
    parser.add_argument("--from-json", type=Path, default=None, help="render an earlier run's JSON instead")
    args = parser.parse_args(argv)
    if args.from_json is not None:
        raw = json.loads(args.from_json.read_text().strip().splitlines()[0])
        lags = {name: Lag(**raw.pop(name)) for name in ("heartbeat_lag", "readiness_lag", "decision_lag")}
        earlier = SoakHealthResult(**raw, **lags)
        print(table(earlier))
        if args.page is not None:
            when = dt.datetime.fromtimestamp(args.from_json.stat().st_mtime, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
            args.page.write_text(place(args.page.read_text(), section(earlier, when=when)))
        return
    result = run(
        rate=args.rate,
        seconds=args.seconds,
        workers=args.workers,
        interval_s=args.interval,
        flip_every=args.flip_every,
        partitions=args.partitions,
        bootstrap=args.bootstrap,
        redis_url=args.redis_url,
    )
    print(json.dumps(asdict(result)))
    if not args.json:
        print(table(result))
    if args.page is not None:
        when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        args.page.write_text(place(args.page.read_text(), section(result, when=when)))


if __name__ == "__main__":
    main()
