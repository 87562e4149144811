"""Staleness across a takeover, on the real broker (issue 21): a heartbeat that changes nothing is
kept in memory and its cluster's row is only checkpointed (`checkpoint_interval_s`), so a worker
that takes over a partition, after a restart or a rebalance, must neither call a cluster stale
because its owner changed nor keep a silent one fresh because it restarted (BUS-7)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from monitor_group import group_has, heartbeat_record, one_per_partition, stop_workers

from rollout_common.envelope import decode
from rollout_common.events import Readiness
from rollout_common.topics.catalog import HEARTBEATS, READINESS

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

Launch = Callable[..., subprocess.Popen[bytes]]


@pytest.fixture
def launch(kafka_bootstrap: str, topic_prefix: str, tmp_path: Path) -> Iterator[Launch]:
    """Starts `python -m rollout_health monitor` processes in one group; stops the survivors after."""
    started: list[subprocess.Popen[bytes]] = []

    def start(**settings: str) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "ROLLOUT_KAFKA_BOOTSTRAP": kafka_bootstrap,
            "ROLLOUT_TOPIC_PREFIX": f"{topic_prefix}.",
            "ROLLOUT_DATA_DIR": str(tmp_path / f"monitor-data-{len(started)}"),
            "ROLLOUT_CHECK_INTERVAL_S": "0.5",
            "ROLLOUT_REPUBLISH_INTERVAL_S": "0",  # only changes on the readiness topic
            "ROLLOUT_SESSION_TIMEOUT_S": "6",
            "ROLLOUT_METRICS_PORT": "0",
            **{f"ROLLOUT_{name.upper()}": value for name, value in settings.items()},
        }
        process = subprocess.Popen([sys.executable, "-m", "rollout_health", "monitor"], env=env, start_new_session=True)
        started.append(process)
        return process

    yield start
    stop_workers(started)


class Fleet:
    """Reporters (a producer) and the readiness topic as the planner sees it (a consumer)."""

    def __init__(self, kafka_bootstrap: str, prefix: str) -> None:
        self.prefix = prefix
        self.producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=True)
        self.readiness = AIOKafkaConsumer(
            prefix + READINESS.name, bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest"
        )
        self.seen: list[tuple[float, Readiness]] = []  # (time read, readiness)
        self.last_beat: dict[str, float] = {}

    async def beat(self, cluster: str) -> None:
        now = time.time()
        value, headers = heartbeat_record(cluster, now)
        await self.producer.send_and_wait(self.prefix + HEARTBEATS.name, value, key=cluster.encode(), headers=headers)
        self.last_beat[cluster] = now

    async def keep_beating(self, clusters: list[str]) -> None:
        while True:
            for cluster in clusters:
                await self.beat(cluster)
            await asyncio.sleep(0.5)

    async def read_until(self, done: Callable[[], bool], timeout_s: float) -> None:
        async with asyncio.timeout(timeout_s):
            while not done():
                for batch in (await self.readiness.getmany(timeout_ms=300)).values():
                    for message in batch:
                        _, change = decode(message.value or b"", dict(message.headers), READINESS.models)
                        assert isinstance(change, Readiness)
                        self.seen.append((time.time(), change))

    def ready(self, clusters: list[str]) -> Callable[[], bool]:
        return lambda: set(clusters) <= {r.cluster for _, r in self.seen if r.ready}

    def stale(self, cluster: str | None = None) -> list[Readiness]:
        return [
            r
            for _, r in self.seen
            if not r.ready and (r.reason or "").startswith("stale") and cluster in (None, r.cluster)
        ]


@pytest.fixture
async def fleet(kafka_bootstrap: str, topic_prefix: str) -> Fleet:
    made = Fleet(kafka_bootstrap, f"{topic_prefix}.")
    await made.producer.start()
    await made.readiness.start()
    yield made  # type: ignore[misc]
    await made.readiness.stop()
    await made.producer.stop()


async def test_bus7_a_rebalance_does_not_call_a_beating_cluster_stale(
    kafka_bootstrap: str, topic_prefix: str, launch: Launch, fleet: Fleet
) -> None:
    """One worker, then a second joins: half the partitions change owner. The rows were written
    once, at each cluster's first heartbeat (checkpoint interval 600 s), so by the rebalance they are
    older than the 15 s limit; the clusters beat every 0.5 s throughout. The new owners count a
    silence from the row's time plus the checkpoint interval: no cluster is called stale. Once a new
    owner has heard a cluster, its silence counts from that heartbeat again: one that falls silent
    after the rebalance is stale 15 s after its last heartbeat, not 600 s."""
    settings = {"staleness_limit_s": "15", "checkpoint_interval_s": "600"}
    launch(**settings)
    group = f"{topic_prefix}.rollout-health"
    await group_has(kafka_bootstrap, group, 1, timeout_s=120)
    clusters = one_per_partition("busy")
    beating = asyncio.create_task(fleet.keep_beating(clusters))
    try:
        await fleet.read_until(fleet.ready(clusters), timeout_s=60)
        first_ready = time.time()
        # the rows, written at the first heartbeats, get older than the limit before the rebalance
        await fleet.read_until(lambda: time.time() - first_ready > 16, timeout_s=60)
        launch(**settings)
        await group_has(kafka_bootstrap, group, 2, timeout_s=120)
        # 20 s more of beating under the new owners (longer than the limit)
        rebalanced = time.time()
        await fleet.read_until(lambda: time.time() - rebalanced > 20, timeout_s=60)
        assert fleet.stale() == []
        beating.cancel()
        quiet, others = clusters[0], clusters[1:]
        beating = asyncio.create_task(fleet.keep_beating(others))
        silent_from = fleet.last_beat[quiet]
        await fleet.read_until(lambda: bool(fleet.stale(quiet)), timeout_s=60)
    finally:
        beating.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beating
    [stale] = fleet.stale()
    assert stale.cluster == quiet
    assert stale.observed_at is not None
    assert 15 <= stale.observed_at - silent_from <= 15 + 8, (stale.observed_at - silent_from, stale.reason)


async def test_bus7_a_restart_does_not_keep_a_silent_cluster_fresh(
    kafka_bootstrap: str, topic_prefix: str, launch: Launch, fleet: Fleet
) -> None:
    """A cluster beats for 10 s (its row checkpointed every 4 s) and falls silent; the monitor is
    killed at once and started again. The new worker knows the cluster only from its row: it marks
    it stale counting from the row's time (plus at most the checkpoint interval), not from its own
    start, so the silence it reports is the real one, within the 4 s interval. (A worker that kept a
    cluster's time in memory only would have to start its clock at its own start, and say ~8 s.)"""
    settings = {"staleness_limit_s": "8", "checkpoint_interval_s": "4"}
    first = launch(**settings)
    group = f"{topic_prefix}.rollout-health"
    await group_has(kafka_bootstrap, group, 1, timeout_s=120)
    quiet = "quiet-1"
    started = time.time()
    while time.time() - started < 10:
        await fleet.beat(quiet)
        await fleet.read_until(lambda: True, timeout_s=5)
        await asyncio.sleep(0.5)
    await fleet.read_until(fleet.ready([quiet]), timeout_s=60)
    silent_from = fleet.last_beat[quiet]
    os.killpg(first.pid, signal.SIGKILL)  # supervisor and worker: no goodbye, no last write
    # started again 6 s into the silence: a worker that counted the silence from its own start
    # would report about 8 s at 14 s or later
    await fleet.read_until(lambda: time.time() - silent_from > 6, timeout_s=30)
    launch(**settings)
    await fleet.read_until(lambda: bool(fleet.stale(quiet)), timeout_s=120)
    [stale] = [r for _, r in fleet.seen if not r.ready]
    assert stale.observed_at is not None
    silence = stale.observed_at - silent_from
    reported = int(str(stale.reason).removeprefix("stale: no heartbeat for ").removesuffix(" s"))
    # the row's time is at most 4 s before the last heartbeat: the reported silence is the real one
    # give or take that (and the rounding), and it is at least the limit
    assert silence - 1 <= reported <= silence + 4 + 1, (silence, stale.reason)
    assert reported >= 8
