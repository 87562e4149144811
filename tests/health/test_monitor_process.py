"""The health monitor as a process (`python -m rollout_health monitor`) on the real broker."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from faust.serializers.codecs import get_codec

from rollout_adapters.memory_bus import kafka_partition
from rollout_common.envelope import decode, encode
from rollout_common.events import Readiness
from rollout_common.heartbeat import Heartbeat
from rollout_common.topics.catalog import DEAD_LETTER, HEARTBEATS, READINESS
from rollout_devenv import KafkaBroker
from rollout_health.partition_check import changelog_topic
from rollout_health.settings import MonitorSettings

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

_STOP_S = 30.0


@pytest.fixture
def monitor_process(kafka_bootstrap: str, topic_prefix: str, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    env = {
        **os.environ,
        "ROLLOUT_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "ROLLOUT_TOPIC_PREFIX": f"{topic_prefix}.",
        "ROLLOUT_DATA_DIR": str(tmp_path / "monitor-data"),
        "ROLLOUT_STALENESS_LIMIT_S": "6",
        "ROLLOUT_CHECK_INTERVAL_S": "0.5",
        "ROLLOUT_REPUBLISH_INTERVAL_S": "0",  # these tests count changes; repeats have their own test
        "ROLLOUT_METRICS_HOST": "127.0.0.1",
        "ROLLOUT_METRICS_PORT": str(_free_port()),
    }
    process = subprocess.Popen([sys.executable, "-m", "rollout_health", "monitor"], env=env, start_new_session=True)
    process.metrics_port = int(env["ROLLOUT_METRICS_PORT"])  # type: ignore[attr-defined]
    yield process
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(_STOP_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # the supervisor and its worker
            process.wait()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _get(port: int, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}{path}") as response:
        return response.status, await response.text()


class Heartbeats:
    """An independent producer of heartbeats, as any reporter would be."""

    def __init__(self, producer: AIOKafkaProducer, topic: str) -> None:
        self._producer = producer
        self._topic = topic

    async def send(self, cluster: str, *, ready: bool, detail: str | None = None, age_s: float = 0.0) -> None:
        """A heartbeat observed `age_s` before it is sent."""
        now = time.time()
        heartbeat = Heartbeat(cluster=cluster, ready=ready, observed_at=now - age_s, reporter="test", detail=detail)
        value, headers = encode(heartbeat, event_id=f"{cluster}-{now}", source="test", at=now)
        await self._producer.send_and_wait(self._topic, value, key=cluster.encode(), headers=list(headers.items()))

    async def send_raw(self, key: bytes, value: bytes) -> None:
        await self._producer.send_and_wait(self._topic, value, key=key)


@pytest.fixture
async def heartbeats(kafka_bootstrap: str, topic_prefix: str) -> AsyncIterator[Heartbeats]:
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=True)
    await producer.start()
    yield Heartbeats(producer, f"{topic_prefix}.{HEARTBEATS.name}")
    await producer.stop()


async def _topics_exist(kafka_bootstrap: str, names: set[str]) -> None:
    """The monitor creates its topics; producing before that would auto-create them wrongly."""
    consumer = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap)
    await consumer.start()
    try:
        async with asyncio.timeout(30):
            while True:  # no event to wait on: ask the broker until it lists them
                if names <= await consumer.topics():
                    return
                await asyncio.sleep(0.2)
    finally:
        await consumer.stop()


async def test_heartbeats_become_readiness_changes_and_silence_becomes_stale(
    kafka_bootstrap: str, topic_prefix: str, monitor_process: subprocess.Popen[bytes], heartbeats: Heartbeats
) -> None:
    prefix = f"{topic_prefix}."
    await _topics_exist(kafka_bootstrap, {prefix + t.name for t in (HEARTBEATS, READINESS, DEAD_LETTER)})
    readiness = AIOKafkaConsumer(
        prefix + READINESS.name, bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest"
    )
    dead_letters = AIOKafkaConsumer(
        prefix + DEAD_LETTER.name, bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest"
    )
    await readiness.start()
    await dead_letters.start()
    changes: list[tuple[str, bool, str | None]] = []

    async def keep_c1_alive() -> None:
        while True:
            await heartbeats.send("c1", ready=True)
            await asyncio.sleep(0.5)

    def seen(cluster: str, ready: bool, reason: str) -> bool:
        return any(c == (cluster, ready, c[2]) and (c[2] or "").startswith(reason) for c in changes)

    async def until(cluster: str, ready: bool, reason: str, *, timeout_s: float) -> None:
        async with asyncio.timeout(timeout_s):
            while not seen(cluster, ready, reason):
                for batch in (await readiness.getmany(timeout_ms=300)).values():
                    for message in batch:
                        _, change = decode(message.value or b"", dict(message.headers), READINESS.models)
                        assert isinstance(change, Readiness)
                        changes.append((change.cluster, change.ready, change.reason))

    alive = asyncio.create_task(keep_c1_alive())
    try:
        await until("c1", True, "reported ready", timeout_s=45)  # the monitor is up
        await heartbeats.send_raw(b"c2", b"not an event")
        await heartbeats.send("c2", ready=True)
        await until("c2", True, "reported ready", timeout_s=10)
        # c2 falls silent: stale after 6 s (checked every 0.5 s), while c1 keeps beating.
        await until("c2", False, "stale: no heartbeat for", timeout_s=15)
        alive.cancel()
        await heartbeats.send("c1", ready=False, detail="apiserver down")
        await until("c1", False, "apiserver down", timeout_s=10)
        [letter] = [m for batch in (await dead_letters.getmany(timeout_ms=5000)).values() for m in batch]
        port = monitor_process.metrics_port  # type: ignore[attr-defined]
        assert (await _get(port, "/healthz"))[0] == 200
        assert (await _get(port, "/readyz"))[0] == 200
        _, metrics = await _get(port, "/metrics")
    finally:
        alive.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await alive
        await readiness.stop()
        await dead_letters.stop()
    assert [c for c in changes if c[0] == "c1"] == [("c1", True, "reported ready"), ("c1", False, "apiserver down")]
    heartbeats_topic = f"{prefix}{HEARTBEATS.name}"
    assert f'rollout_dead_letters_total{{reason_kind="bad_headers",topic="{heartbeats_topic}"}} 1.0' in metrics
    assert "rollout_health_stale_marks_total 1.0" in metrics
    # stale after at least the 6 s limit; how much later depends on the timer's tick and the load
    [(c2_up, *_), (c2_down, stale_reason)] = [(c[1], c[2]) for c in changes if c[0] == "c2"]
    assert (c2_up, c2_down) == (True, False)
    silent_s = int(str(stale_reason).removeprefix("stale: no heartbeat for ").removesuffix(" s"))
    assert 6 <= silent_s <= 9, stale_reason
    assert letter.value == b"not an event"
    assert dict(letter.headers)["dlq_reason"].startswith(b"missing CloudEvents header")
    monitor_process.send_signal(signal.SIGTERM)
    assert monitor_process.wait(_STOP_S) == 0


async def test_rows_reach_the_changelog_as_faust_writes_them_on_their_clusters_partitions(
    kafka_bootstrap: str, topic_prefix: str, monitor_process: subprocess.Popen[bytes], heartbeats: Heartbeats
) -> None:
    """The table's changelog records, sent a batch per partition: the key and value bytes faust's
    json codec writes, on the partition of the cluster's heartbeats (where a worker that takes the
    partition over recovers them), one row per first heartbeat, saying what was published."""
    prefix = f"{topic_prefix}."
    await _topics_exist(kafka_bootstrap, {prefix + HEARTBEATS.name})
    names = [f"edge-{i:02d}" for i in range(12)]
    sent_at: dict[str, float] = {}
    for name in names:
        sent_at[name] = time.time()
        await heartbeats.send(name, ready=True)
    changelog = changelog_topic(MonitorSettings(topic_prefix=prefix))
    rows = AIOKafkaConsumer(changelog, bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest")
    await rows.start()
    found: dict[bytes, tuple[int, bytes]] = {}
    try:
        async with asyncio.timeout(60):
            while len(found) < len(names):
                for tp, batch in (await rows.getmany(timeout_ms=300)).items():
                    for message in batch:
                        assert message.key is not None and message.value is not None
                        found[message.key] = (tp.partition, message.value)
    finally:
        await rows.stop()
    faust_json = get_codec("json")
    assert sorted(found) == sorted(faust_json.dumps(name) for name in names)
    for name in names:
        partition, value = found[faust_json.dumps(name)]
        assert partition == kafka_partition(name.encode(), HEARTBEATS.partitions), name
        row = faust_json.loads(value)
        assert (row["ready"], row["last_published"]) == (True, True), row
        assert row["last_seen"] == pytest.approx(sent_at[name], abs=5.0)
        assert value == faust_json.dumps(row)  # the bytes faust's own codec writes for this row


async def test_bad_heartbeats_are_dead_lettered_with_a_reason_and_the_monitor_goes_on(
    kafka_bootstrap: str, topic_prefix: str, monitor_process: subprocess.Popen[bytes], heartbeats: Heartbeats
) -> None:
    """BUS-4 on the heartbeats topic: each bad record becomes one dead letter naming why, the
    counter moves by one each, and a good heartbeat sent after all of them is still turned into
    readiness."""
    prefix = f"{topic_prefix}."
    await _topics_exist(kafka_bootstrap, {prefix + t.name for t in (HEARTBEATS, READINESS, DEAD_LETTER)})
    now = time.time()
    good = Heartbeat(cluster="c9", ready=True, observed_at=now, reporter="test")
    value, headers = encode(good, event_id="good", source="test", at=now)
    body = value.decode()
    cases: dict[str, tuple[bytes, dict[str, bytes], str]] = {
        "not-json": (b"\x00{not json", headers, "value is not JSON"),
        "wrong-schema": (body.replace('"ready":true', '"ready":"maybe"').encode(), headers, "invalid Heartbeat"),
        "extra-field": (body.replace("{", '{"unexpected":1,', 1).encode(), headers, "invalid Heartbeat"),
        "unknown-ce-type": (value, dict(headers, ce_type=b"io.rollout.bogus.v1"), "ce_type 'io.rollout.bogus.v1'"),
        "no-ce-headers": (value, {}, "missing CloudEvents header(s)"),
        "bad-specversion": (value, dict(headers, ce_specversion=b"0.3"), "ce_specversion '0.3'"),
        "header-not-utf8": (value, dict(headers, ce_source=b"\xff\xfe"), "a header is not UTF-8"),
        "huge": (b'{"pad":"' + b"x" * 1_001_000 + b'"}', headers, "exceeds 1000000"),
    }
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, max_request_size=2 << 20)
    await producer.start()
    try:
        for name, (raw, hdrs, _) in cases.items():
            await producer.send_and_wait(prefix + HEARTBEATS.name, raw, key=name.encode(), headers=list(hdrs.items()))
        await producer.send_and_wait(prefix + HEARTBEATS.name, value, key=b"c9", headers=list(headers.items()))
    finally:
        await producer.stop()
    letters = await _read_all(kafka_bootstrap, prefix + DEAD_LETTER.name, want=len(cases))
    ready = await _read_all(kafka_bootstrap, prefix + READINESS.name, want=1)
    reasons = {m.key.decode(): dict(m.headers)["dlq_reason"].decode() for m in letters if m.key}
    assert set(reasons) == set(cases)
    for name, (_, _, reason) in cases.items():
        assert reason in reasons[name], (name, reasons[name])
    _, change = decode(ready[0].value or b"", dict(ready[0].headers), READINESS.models)
    assert isinstance(change, Readiness) and (change.cluster, change.ready) == ("c9", True)
    _, metrics = await _get(monitor_process.metrics_port, "/metrics")  # type: ignore[attr-defined]
    counted = sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("rollout_dead_letters_total{") and HEARTBEATS.name in line
    )
    assert counted == len(cases)
    assert monitor_process.poll() is None, "the monitor stopped"


async def test_staleness_counts_from_when_a_heartbeat_was_observed_not_when_it_arrived(
    kafka_bootstrap: str, topic_prefix: str, monitor_process: subprocess.Popen[bytes], heartbeats: Heartbeats
) -> None:
    """BUS-7: a heartbeat observed 100 s ago and delivered now becomes readiness carrying that
    observation time, and its cluster is stale at once (limit 6 s), silent for about 100 s."""
    prefix = f"{topic_prefix}."
    await _topics_exist(kafka_bootstrap, {prefix + t.name for t in (HEARTBEATS, READINESS, DEAD_LETTER)})
    before = time.time()
    await heartbeats.send("c3", ready=True, age_s=100)
    found = await _read_all(kafka_bootstrap, prefix + READINESS.name, want=2)
    changes = []
    for message in found:
        _, change = decode(message.value or b"", dict(message.headers), READINESS.models)
        assert isinstance(change, Readiness)
        changes.append(change)
    [ready, stale] = changes
    assert (ready.cluster, ready.ready, ready.reason) == ("c3", True, "reported ready")
    assert ready.observed_at is not None and before - 101 < ready.observed_at < before - 99
    assert (stale.cluster, stale.ready) == ("c3", False)
    silent_s = int(str(stale.reason).removeprefix("stale: no heartbeat for ").removesuffix(" s"))
    assert 100 <= silent_s <= 110, stale.reason
    assert stale.observed_at is not None and stale.observed_at >= before


async def _read_all(bootstrap: str, topic: str, *, want: int, timeout_s: float = 60.0) -> list:  # type: ignore[type-arg]
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", fetch_max_bytes=4 << 20
    )
    await consumer.start()
    found = []
    try:
        async with asyncio.timeout(timeout_s):
            while len(found) < want:
                for batch in (await consumer.getmany(timeout_ms=300)).values():
                    found.extend(batch)
    finally:
        await consumer.stop()
    return found


async def test_sigterm_with_the_broker_down_stops_the_monitor_within_seconds(
    kafka_broker: KafkaBroker, topic_prefix: str, monitor_process: subprocess.Popen[bytes], heartbeats: Heartbeats
) -> None:
    """Issue 24: the broker goes away while the worker has readiness changes in flight (sent, not
    acknowledged, so their heartbeats are not acked to faust). SIGTERM then stops the monitor,
    supervisor and worker, within 10 s with exit 0: faust no longer waits at its stop for events
    that only an acknowledgement from the absent broker would finish (its supervisor used to kill
    the worker after 20 s)."""
    prefix = f"{topic_prefix}."
    await _topics_exist(kafka_broker.bootstrap, {prefix + t.name for t in (HEARTBEATS, READINESS, DEAD_LETTER)})
    await heartbeats.send("first", ready=True)
    await _read_all(kafka_broker.bootstrap, prefix + READINESS.name, want=1)  # the worker is at work
    for i in range(3000):  # first heartbeats, each a readiness change to send
        now = time.time()
        value, headers = encode(
            Heartbeat(cluster=f"c-{i}", ready=True, observed_at=now), event_id=f"{i}", source="test", at=now
        )
        await heartbeats._producer.send(heartbeats._topic, value, key=f"c-{i}".encode(), headers=list(headers.items()))
    await heartbeats._producer.flush()
    await asyncio.to_thread(kafka_broker.stop)  # off the loop: it blocks until the broker is gone
    monitor_process.send_signal(signal.SIGTERM)
    stopping = time.monotonic()
    code = await asyncio.to_thread(monitor_process.wait, 30)
    took = time.monotonic() - stopping
    assert code == 0
    assert took < 10, f"stopped after {took:.1f} s"
