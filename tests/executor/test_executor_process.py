"""The executor as a process (`python -m rollout_executor`) against the real Kafka and Redis."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.redis_store import RedisStore
from rollout_common.commands import StageAdvance
from rollout_common.envelope import decode, encode
from rollout_common.events import UpgradeResult
from rollout_common.status import Track
from rollout_common.topics.catalog import DEAD_LETTER, STAGE_ADVANCE, UPGRADE_RESULTS

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

FAKE_UPGRADE = Path(__file__).with_name("fake_upgrade.py")
_STOP_S = 15.0

Spawn = Callable[..., subprocess.Popen[bytes]]


@pytest.fixture
def spawn_executor(kafka_bootstrap: str, redis_url: str, topic_prefix: str) -> Iterator[Spawn]:
    """Starts executors in their own process group (so a kill takes their upgrade programs along,
    as when a pod dies) and stops any still running at the end."""
    started: list[subprocess.Popen[bytes]] = []

    def spawn(**settings: str) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "ROLLOUT_KAFKA_BOOTSTRAP": kafka_bootstrap,
            "ROLLOUT_REDIS_URL": redis_url,
            "ROLLOUT_REDIS_NAMESPACE": topic_prefix,
            "ROLLOUT_TOPIC_PREFIX": f"{topic_prefix}.",
            "ROLLOUT_GROUP_ID": f"{topic_prefix}-executors",
            "ROLLOUT_METRICS_PORT": "0",
            **{f"ROLLOUT_{name.upper()}": value for name, value in settings.items()},
        }
        process = subprocess.Popen([sys.executable, "-m", "rollout_executor"], env=env, start_new_session=True)
        started.append(process)
        return process

    yield spawn
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(_STOP_S)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


async def _create_topics(kafka_bootstrap: str, prefix: str) -> None:
    bus = KafkaBus(kafka_bootstrap, client_id=f"{prefix}-setup")
    try:
        await bus.ensure_topics([t.spec(prefix) for t in (STAGE_ADVANCE, UPGRADE_RESULTS, DEAD_LETTER)])
    finally:
        await bus.close()


async def _produce(kafka_bootstrap: str, topic: str, command: StageAdvance) -> None:
    """An independent producer, as the planner (or anyone) would publish a command."""
    value, headers = encode(command, event_id=command.command_id, source="test", at=time.time())
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        await producer.send_and_wait(topic, value, key=command.command_id.encode(), headers=list(headers.items()))
    finally:
        await producer.stop()


async def _results_until(
    kafka_bootstrap: str, topic: str, done: Callable[[list[UpgradeResult]], bool], *, timeout_s: float
) -> list[UpgradeResult]:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    seen: list[UpgradeResult] = []
    try:
        async with asyncio.timeout(timeout_s):
            while not done(seen):
                batches = await consumer.getmany(timeout_ms=500)
                for message in (m for batch in batches.values() for m in batch):
                    _, result = decode(message.value or b"", dict(message.headers), UPGRADE_RESULTS.models)
                    assert isinstance(result, UpgradeResult)
                    seen.append(result)
    finally:
        await consumer.stop()
    return seen


def _finished(clusters: tuple[str, ...]) -> Callable[[list[UpgradeResult]], bool]:
    return lambda seen: {r.cluster for r in seen if r.outcome == "succeeded"} >= set(clusters)


def _command(command_id: str, clusters: tuple[str, ...]) -> StageAdvance:
    return StageAdvance(
        command_id=command_id,
        rollout_id="r1",
        stage="canary",
        track=Track.NODES,
        partition="p0",
        version="1.31.2-gke.100",
        clusters=clusters,
    )


async def test_a_command_from_any_producer_is_upgraded_and_reported(
    kafka_bootstrap: str, topic_prefix: str, spawn_executor: Spawn
) -> None:
    prefix = f"{topic_prefix}."
    await _create_topics(kafka_bootstrap, prefix)
    executor = spawn_executor(simulated__time_scale="0.001")
    clusters = ("c1", "c2", "c3")
    await _produce(kafka_bootstrap, prefix + STAGE_ADVANCE.name, _command("cmd-1", clusters))
    seen = await _results_until(kafka_bootstrap, prefix + UPGRADE_RESULTS.name, _finished(clusters), timeout_s=40)
    assert Counter((r.cluster, r.outcome) for r in seen) == {
        **{(c, "started"): 1 for c in clusters},
        **{(c, "succeeded"): 1 for c in clusters},
    }
    executor.send_signal(signal.SIGTERM)
    assert executor.wait(_STOP_S) == 0


async def test_a_killed_executors_batch_is_finished_by_another_without_double_upgrades(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str, spawn_executor: Spawn, tmp_path: Path
) -> None:
    prefix = f"{topic_prefix}."
    await _create_topics(kafka_bootstrap, prefix)
    log_file = tmp_path / "upgrades.log"
    command_driver = {
        "driver": "command",
        "command__executable": sys.executable,
        "command__args": f'["{FAKE_UPGRADE}", "{log_file}", "2.0"]',
        "max_concurrent_upgrades": "2",
        "lease_s": "2",
    }
    clusters = tuple(f"c{i}" for i in range(6))
    first = spawn_executor(executor_id="first", **command_driver)
    await _produce(kafka_bootstrap, prefix + STAGE_ADVANCE.name, _command("cmd-1", clusters))

    def lines(kind: str) -> Counter[str]:
        text = log_file.read_text() if log_file.exists() else ""
        return Counter(line.split()[1] for line in text.splitlines() if line.startswith(kind))

    # Wait for results recorded in Redis and upgrades running at the same time; then the whole
    # process group dies at once, as a pod does; nothing was committed.
    store = RedisStore(redis_url, namespace=topic_prefix)
    try:
        async with asyncio.timeout(40):
            while True:  # polling a file and Redis: there is nothing to wait on
                recorded = await store.keys("executor:result:")
                if len(recorded) >= 2 and sum(lines("start").values()) > sum(lines("done").values()):
                    break
                await asyncio.sleep(0.05)
    finally:
        await store.close()
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    finished_by_first = set(lines("done"))
    spawn_executor(executor_id="second", **command_driver)
    seen = await _results_until(kafka_bootstrap, prefix + UPGRADE_RESULTS.name, _finished(clusters), timeout_s=45)

    done, starts = lines("done"), lines("start")
    assert done == dict.fromkeys(clusters, 1), "every cluster upgraded to the end exactly once"
    for cluster in finished_by_first:
        assert starts[cluster] == 1, f"{cluster} was finished and recorded, so never started again"
    # Upgrades interrupted by the kill were started again by the second executor, once their
    # lease expired.
    assert all(starts[c] <= 2 for c in clusters)
    assert any(starts[c] == 2 for c in clusters), "the kill was meant to land mid-upgrade"
    assert {r.cluster for r in seen if r.outcome == "succeeded"} == set(clusters)


FAKE_PROBE = Path(__file__).with_name("fake_probe.py")


@pytest.mark.parametrize("probe", [True, False], ids=["probed", "not-probed"])
async def test_an_upgrade_finished_by_a_killed_executor_is_not_run_again_when_probed(
    kafka_bootstrap: str, topic_prefix: str, spawn_executor: Spawn, tmp_path: Path, probe: bool
) -> None:
    """The window between a driver's end and the recorded result: the first executor's upgrade
    program has written "done" and hangs, the executor is SIGKILLed with it, the second takes the
    command over once the first one's group session and lease have lapsed. The log of the
    program's runs is the audit: with the probe the upgrade took effect once, without it twice."""
    prefix = f"{topic_prefix}."
    await _create_topics(kafka_bootstrap, prefix)
    log_file = tmp_path / "upgrades.log"

    def command_driver(*flags: str) -> dict[str, str]:
        return {
            "driver": "command",
            "command__executable": sys.executable,
            "command__args": json.dumps([str(FAKE_UPGRADE), str(log_file), "0.1", *flags]),
            "command__probe": json.dumps([sys.executable, str(FAKE_PROBE), str(log_file)]),
            "probe_before_rerun": str(probe).lower(),
            "lease_s": "2",
            "session_timeout_s": "6",
        }

    def lines(kind: str) -> int:
        text = log_file.read_text() if log_file.exists() else ""
        return sum(line.startswith(f"{kind} c1 ") for line in text.splitlines())

    first = spawn_executor(executor_id="first", **command_driver("--then-hang"))
    await _produce(kafka_bootstrap, prefix + STAGE_ADVANCE.name, _command("cmd-1", ("c1",)))
    async with asyncio.timeout(40):
        while True:  # polling a file: there is nothing to wait on
            if lines("done"):
                break
            await asyncio.sleep(0.05)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    spawn_executor(executor_id="second", **command_driver())
    seen = await _results_until(kafka_bootstrap, prefix + UPGRADE_RESULTS.name, _finished(("c1",)), timeout_s=60)

    assert (lines("start"), lines("done")) == ((1, 1) if probe else (2, 2))
    assert [r.outcome for r in seen] == (["started", "succeeded"] if probe else ["started", "started", "succeeded"])
