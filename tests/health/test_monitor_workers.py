"""Several health monitor workers in one group on the real broker, one of them killed: staleness and
readiness repeats stay correct (BUS-7), whichever worker owned which heartbeat partitions."""

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
from aiokafka.admin import AIOKafkaAdminClient
from monitor_group import group_has, heartbeat_record, one_per_partition, stop_workers

from rollout_common.envelope import decode
from rollout_common.events import Readiness
from rollout_common.topics.catalog import HEARTBEATS, READINESS

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

WORKERS = 3
STALENESS_S = 10


@pytest.fixture
def workers(kafka_bootstrap: str, topic_prefix: str, tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    env = {
        **os.environ,
        "ROLLOUT_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "ROLLOUT_TOPIC_PREFIX": f"{topic_prefix}.",
        # shared by the workers: with the memory:// store faust only creates it
        "ROLLOUT_DATA_DIR": str(tmp_path / "monitor-data"),
        "ROLLOUT_STALENESS_LIMIT_S": str(STALENESS_S),
        "ROLLOUT_CHECK_INTERVAL_S": "0.5",
        "ROLLOUT_REPUBLISH_INTERVAL_S": "2",
        # a takeover counts a silence from a row's time plus this (test_monitor_takeover.py)
        "ROLLOUT_CHECKPOINT_INTERVAL_S": "2",
        "ROLLOUT_SESSION_TIMEOUT_S": "6",
        "ROLLOUT_METRICS_PORT": "0",
    }
    processes = [
        subprocess.Popen([sys.executable, "-m", "rollout_health", "monitor"], env=env, start_new_session=True)
        for _ in range(WORKERS)
    ]
    yield processes
    stop_workers(processes)


async def _committed_past(kafka_bootstrap: str, group: str, topic: str, records: list[tuple[int, int]]) -> None:
    """Until the group has committed past each (partition, offset) of `topic`."""
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        async with asyncio.timeout(30):
            while True:  # faust commits on its own interval: ask until it has
                offsets = await admin.list_consumer_group_offsets(group)
                committed = {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == topic}
                if all(committed.get(partition, -1) > offset for partition, offset in records):
                    return
                await asyncio.sleep(0.3)
    finally:
        await admin.close()


async def test_bus7_three_workers_one_killed_silent_clusters_go_stale_once_and_live_ones_keep_repeating(
    kafka_bootstrap: str, topic_prefix: str, workers: list[subprocess.Popen[bytes]]
) -> None:
    prefix = f"{topic_prefix}."
    await group_has(kafka_bootstrap, prefix + "rollout-health", WORKERS, timeout_s=120)
    silent, live = one_per_partition("silent"), one_per_partition("live")
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=True)
    readiness = AIOKafkaConsumer(
        prefix + READINESS.name, bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest"
    )
    await producer.start()
    await readiness.start()
    seen: list[tuple[float, str, bool, str | None]] = []

    async def beat(cluster: str) -> tuple[int, int]:
        value, headers = heartbeat_record(cluster, time.time())
        sent = await producer.send_and_wait(prefix + HEARTBEATS.name, value, key=cluster.encode(), headers=headers)
        return sent.partition, sent.offset

    async def keep_alive() -> None:
        while True:
            for cluster in live:
                await beat(cluster)
            await asyncio.sleep(1.0)

    async def read_until(done: Callable[[], bool], timeout_s: float) -> None:
        async with asyncio.timeout(timeout_s):
            while not done():
                for batch in (await readiness.getmany(timeout_ms=300)).values():
                    for message in batch:
                        _, change = decode(message.value or b"", dict(message.headers), READINESS.models)
                        assert isinstance(change, Readiness)
                        seen.append((time.monotonic(), change.cluster, change.ready, change.reason))

    alive = asyncio.create_task(keep_alive())
    try:
        last_silent = [await beat(cluster) for cluster in silent]
        everyone = set(silent) | set(live)
        await read_until(lambda: everyone <= {c for _, c, ready, _ in seen if ready}, timeout_s=60)
        # Once the heartbeats' offsets are committed, the killed worker's successor does not read the
        # silent clusters' heartbeats again: it knows them only from the table's changelog.
        await _committed_past(kafka_bootstrap, prefix + "rollout-health", prefix + HEARTBEATS.name, last_silent)
        os.killpg(workers[0].pid, signal.SIGKILL)  # supervisor and worker, no goodbye to the group
        killed_at = time.monotonic()

        def repeated_after_kill() -> bool:
            return set(live) <= {c for t, c, _, reason in seen if t > killed_at + 8 and reason == "unchanged"}

        def all_stale() -> bool:
            return set(silent) <= {
                c for _, c, ready, reason in seen if not ready and (reason or "").startswith("stale")
            }

        # the killed worker's partitions move after the 6 s session timeout; their rows come back
        # from the changelog, so their silent clusters still go stale and their live ones repeat
        await read_until(lambda: all_stale() and repeated_after_kill(), timeout_s=90)
    finally:
        alive.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await alive
        await readiness.stop()
        await producer.stop()
    stale = [c for _, c, ready, reason in seen if not ready and (reason or "").startswith("stale")]
    # Each silent cluster marked, whoever owned it; at least once, not exactly: a worker killed
    # between publishing a mark and its table's changelog write leaves its successor to mark the
    # cluster again (the planner ignores a repeated not-ready).
    assert set(stale) == set(silent)
    assert not [c for _, c, ready, _ in seen if c in live and not ready]  # a live cluster is never stale
    assert [w.poll() for w in workers[1:]] == [None] * (WORKERS - 1)


async def test_bus4_a_worker_killed_mid_stream_loses_no_cluster_for_good(
    kafka_bootstrap: str, topic_prefix: str, workers: list[subprocess.Popen[bytes]]
) -> None:
    """Workers send readiness without awaiting each ack; a worker is SIGKILLed while 4,000 first
    heartbeats stream in (some sent and not yet acknowledged, some read and not yet committed).

    What the product guarantees is that no cluster is lost for good: heartbeats are a state
    reported again every `heartbeat_interval_s`, so once the group has settled, the clusters' next
    heartbeats make every one of them ready on the readiness topic. The killed worker dies before
    its first offset commit, so its successors must read its partitions from their beginning, not
    from where their fetches during the rebalance left them (`rollout_adapters.faust_uncommitted_seek`;
    without it 44 to 92 clusters stayed unseen on a loaded machine). That each first heartbeat
    becomes a change is not asserted; the count is printed. Repeats ("unchanged") count for the end
    state: they are how the monitor repairs a change lost between its table and the topic."""
    prefix = f"{topic_prefix}."
    await group_has(kafka_bootstrap, prefix + "rollout-health", WORKERS, timeout_s=120)
    clusters = [f"burst-{i:05d}" for i in range(4_000)]
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=True, linger_ms=5)
    readiness = AIOKafkaConsumer(
        prefix + READINESS.name, bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest"
    )
    await producer.start()
    await readiness.start()
    changed: set[str] = set()
    ready: set[str] = set()

    async def read_some() -> None:
        for batch in (await readiness.getmany(timeout_ms=200)).values():
            for message in batch:
                _, change = decode(message.value or b"", dict(message.headers), READINESS.models)
                assert isinstance(change, Readiness)
                if change.ready:
                    ready.add(change.cluster)
                    if change.reason == "reported ready":
                        changed.add(change.cluster)

    async def report_all(*, kill_mid_stream: bool) -> bool:
        killed = False
        for start in range(0, len(clusters), 200):
            sends = []
            for cluster in clusters[start : start + 200]:
                value, headers = heartbeat_record(cluster, time.time())
                sends.append(
                    await producer.send(prefix + HEARTBEATS.name, value, key=cluster.encode(), headers=headers)
                )
            await asyncio.gather(*sends)
            await read_some()
            if kill_mid_stream and not killed and changed:  # the workers are at it: kill one mid-stream
                os.killpg(workers[0].pid, signal.SIGKILL)
                killed = True
        return killed

    try:
        assert await report_all(kill_mid_stream=True)
        await group_has(kafka_bootstrap, prefix + "rollout-health", WORKERS - 1, timeout_s=120)
        assert await report_all(kill_mid_stream=False) is False  # the reporters' next round
        try:
            async with asyncio.timeout(180):  # a rebalance, the replay, the second round
                while not set(clusters) <= ready:
                    await read_some()
        except TimeoutError:
            missing = sorted(set(clusters) - ready)
            raise AssertionError(f"{len(missing)} clusters never ready on the topic, first {missing[:5]}") from None
    finally:
        await readiness.stop()
        await producer.stop()
    skipped = len(set(clusters) - changed)
    print(f"\nfirst heartbeats that became no change across the kill: {skipped} of {len(clusters)}")
    assert set(clusters) <= ready
    assert [w.poll() for w in workers[1:]] == [None] * (WORKERS - 1)
