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

import aiohttp
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from rollout_common.envelope import decode, encode
from rollout_common.events import Readiness
from rollout_common.heartbeat import Heartbeat
from rollout_common.topics.catalog import DEAD_LETTER, HEARTBEATS, READINESS

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

_STOP_S = 30.0


@pytest.fixture
def monitor_process(kafka_bootstrap: str, topic_prefix: str) -> Iterator[subprocess.Popen[bytes]]:
    env = {
        **os.environ,
        "ROLLOUT_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "ROLLOUT_TOPIC_PREFIX": f"{topic_prefix}.",
        "ROLLOUT_STALENESS_LIMIT_S": "6",
        "ROLLOUT_CHECK_INTERVAL_S": "0.5",
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

    async def send(self, cluster: str, *, ready: bool, detail: str | None = None) -> None:
        now = time.time()
        heartbeat = Heartbeat(cluster=cluster, ready=ready, observed_at=now, reporter="test", detail=detail)
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
    assert [c for c in changes if c[0] == "c2"] == [
        ("c2", True, "reported ready"),
        ("c2", False, "stale: no heartbeat for 6 s"),
    ]
    assert letter.value == b"not an event"
    assert dict(letter.headers)["dlq_reason"].startswith(b"missing CloudEvents header")
    monitor_process.send_signal(signal.SIGTERM)
    assert monitor_process.wait(_STOP_S) == 0
