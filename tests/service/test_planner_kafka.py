"""The planner service against the real broker and Redis: the same flow, outside producers, kills."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path

import pytest
import redis.asyncio as aioredis
import yaml
from aiokafka import AIOKafkaConsumer, TopicPartition
from planner_harness import NEW, OLD, START, FakeFleet, make_planner, release
from topic_reader import Message, bodies, caught_up, header, produce, read_topic

from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.redis_store import RedisStore
from rollout_common.errors import PermanentError
from rollout_common.ports import Outgoing
from rollout_common.topics import ALL
from rollout_common.topics.catalog import DEAD_LETTER, PROGRESS, RELEASE_TARGETS, STAGE_ADVANCE
from rollout_planner.service.clock import ManualClock
from rollout_planner.service.intake import INPUT_TOPICS
from rollout_planner.service.planner import Planner

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

# The kcat example of docs/events.md, header for header and byte for byte.
KCAT_HEADERS = [
    ("ce_specversion", b"1.0"),
    ("ce_id", b"rel-1"),
    ("ce_source", b"platform-team"),
    ("ce_type", b"io.rollout.release_target.v1"),
    ("content-type", b"application/json"),
]
KCAT_BODY = b'{"eventId": "rel-1", "channel": "regular", "targets": {"1.30": "1.31.13-gke.1023000"}}'


@pytest.fixture
def prefix(topic_prefix: str) -> str:
    return topic_prefix + "."


@pytest.fixture
async def bus(kafka_bootstrap: str, prefix: str) -> AsyncIterator[KafkaBus]:
    """A bus for the test's own messages; it creates the catalog's topics first, as a deployment
    would, so nothing produced before the planner starts lands on an auto-created topic."""
    made = KafkaBus(kafka_bootstrap, client_id=f"{prefix}test")
    await made.ensure_topics([topic.spec(prefix) for topic in ALL])
    yield made
    await made.close()


@contextlib.asynccontextmanager
async def running(planner: Planner) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(planner.run())
    try:
        yield task
    finally:
        planner.stop()
        await asyncio.wait_for(task, 30)


@contextlib.asynccontextmanager
async def kafka_planner(bootstrap: str, redis_url: str, prefix: str, clock: ManualClock) -> AsyncIterator[Planner]:
    """A planner with a bus and a store of its own, as a process would have; closed afterwards."""
    bus = KafkaBus(bootstrap, client_id=f"{prefix}planner")
    store = RedisStore(redis_url, namespace=prefix)
    try:
        yield make_planner(bus=bus, store=store, prefix=prefix, clock=clock)
    finally:
        await bus.close()
        await store.close()


def advances_at_least(count: int):  # type: ignore[no-untyped-def]
    return lambda records: len(records) >= count


def nodes_handed_out(count: int) -> Callable[[list[Message]], bool]:
    return lambda records: sum(len(b["clusters"]) for b in bodies(records) if b["track"] == "nodes") >= count


def assert_canary_decided_once(records: list[Message], clusters: list[str]) -> None:
    """The canary decided once: one control-plane batch of its clusters, then each cluster's nodes
    exactly once. The nodes go out in one batch or one per cluster, as the two results arrive in
    one poll or two (SOAK-1). A batch published again after a kill (its outbox not yet marked
    published) is allowed: same id, same bytes, and executors drop it."""
    by_id: dict[str, set[bytes]] = {}
    for record in records:
        by_id.setdefault(json.loads(record.value)["commandId"], set()).add(record.value)
    assert all(len(values) == 1 for values in by_id.values()), by_id
    batches = [json.loads(next(iter(values))) for values in by_id.values()]
    assert [b["clusters"] for b in batches if b["track"] == "controlPlane"] == [clusters]
    assert sorted(c for b in batches if b["track"] == "nodes" for c in b["clusters"]) == clusters
    assert {b["stage"] for b in batches} == {"canary"}


async def test_release_malformed_message_and_results_flow_through_kafka_and_redis(
    kafka_bootstrap: str, redis_url: str, prefix: str, bus: KafkaBus
) -> None:
    async with kafka_planner(kafka_bootstrap, redis_url, prefix, ManualClock(START)) as planner, running(planner):
        await produce(
            kafka_bootstrap, prefix + RELEASE_TARGETS.name, key=b"regular", value=b"\x00garbage", headers=KCAT_HEADERS
        )
        await release(bus, prefix)
        [first] = await read_topic(kafka_bootstrap, prefix + STAGE_ADVANCE.name, until=advances_at_least(1))
        assert json.loads(first.value)["stage"] == "canary"
        assert header(first, "ce_id") == json.loads(first.value)["commandId"].encode()

        [dead] = await read_topic(kafka_bootstrap, prefix + DEAD_LETTER.name, until=advances_at_least(1))
        assert dead.value == b"\x00garbage"
        assert b"not JSON" in (header(dead, "dlq_reason") or b"")
        assert header(dead, "dlq_offset") == b"0"

        fleet = FakeFleet(bus, prefix)
        records = [first]
        await fleet.answer(records)
        records = await read_topic(kafka_bootstrap, prefix + STAGE_ADVANCE.name, until=nodes_handed_out(2))
        # SOAK-1: each cluster's nodes go out once its control plane succeeded; the two results may
        # arrive in one poll (one nodes batch) or two (two batches), never a cluster twice.
        nodes = [c for b in bodies(records) if b["track"] == "nodes" for c in b["clusters"]]
        assert sorted(nodes) == ["can-1", "can-2"]
        assert [(b["stage"], b["clusters"]) for b in bodies(records) if b["track"] == "controlPlane"] == [
            ("canary", ["can-1", "can-2"])
        ]
        # The control plane soaks once its clusters are reported ready again (GATE-1).
        await read_topic(
            kafka_bootstrap,
            prefix + PROGRESS.name,
            until=lambda rs: any(b.get("state") == "SOAKING" for b in bodies(rs)),
        )

    # After the transition is published, the status written in the same batch is there too.
    client = aioredis.Redis.from_url(redis_url)
    try:
        status = json.loads(await client.get(f"{prefix}:status") or b"{}")
    finally:
        await client.aclose()
    assert status["stages"][0]["tracks"]["controlPlane"]["state"] == "SOAKING"


async def test_the_documented_kcat_message_from_an_independent_producer_is_accepted(
    kafka_bootstrap: str, redis_url: str, prefix: str, bus: KafkaBus
) -> None:
    async with kafka_planner(kafka_bootstrap, redis_url, prefix, ManualClock(START)) as planner, running(planner):
        await produce(
            kafka_bootstrap, prefix + RELEASE_TARGETS.name, key=b"regular", value=KCAT_BODY, headers=KCAT_HEADERS
        )
        [advance] = await read_topic(kafka_bootstrap, prefix + STAGE_ADVANCE.name, until=advances_at_least(1))
        assert json.loads(advance.value)["version"] == NEW
        progress = await read_topic(
            kafka_bootstrap,
            prefix + PROGRESS.name,
            until=lambda rs: any(b["kind"] == "rollout_transition" for b in bodies(rs)),
        )
        assert any("rel-1" in b.get("reason", "") for b in bodies(progress))


async def test_a_cancelled_planner_resumes_without_repeating_a_batch(
    kafka_bootstrap: str, redis_url: str, prefix: str, bus: KafkaBus
) -> None:
    clock = ManualClock(START)
    async with kafka_planner(kafka_bootstrap, redis_url, prefix, clock) as first:
        task = asyncio.create_task(first.run())
        await release(bus, prefix)
        records = await read_topic(kafka_bootstrap, prefix + STAGE_ADVANCE.name, until=advances_at_least(1))
        task.cancel()  # killed wherever it is: mid-poll, mid-write or mid-commit
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async with kafka_planner(kafka_bootstrap, redis_url, prefix, clock) as second, running(second):
        await FakeFleet(bus, prefix).answer(records)
        records = await read_topic(kafka_bootstrap, prefix + STAGE_ADVANCE.name, until=nodes_handed_out(2))
        # everything on its inputs handled, so a wrongly repeated batch would be out by now
        await caught_up(kafka_bootstrap, f"{prefix}planner", [prefix + t.name for t in INPUT_TOPICS])
    records = await read_topic(kafka_bootstrap, prefix + STAGE_ADVANCE.name, until=nodes_handed_out(2))
    assert_canary_decided_once(records, ["can-1", "can-2"])


# -- the real process ------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def scenario_file(tmp_path: Path) -> Path:
    scenario = {
        "name": "svc",
        "clusters": [
            {"name": f"c-{i}", "labels": {"env": "canary" if i < 2 else "prod"}, "version": OLD} for i in range(4)
        ],
        "sequence": {
            "name": "svc",
            "channel": "regular",
            "stages": [
                {"name": "canary", "clusterSelector": {"matchLabels": {"env": "canary"}}, "soak": "1d"},
                {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}, "soak": "1d"},
            ],
        },
    }
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


@pytest.fixture
def planner_process(
    kafka_bootstrap: str, redis_url: str, prefix: str, scenario_file: Path
) -> Iterator[tuple[list[subprocess.Popen[bytes]], dict[str, str]]]:
    env = os.environ | {
        "ROLLOUT_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "ROLLOUT_REDIS_URL": redis_url,
        "ROLLOUT_REDIS_NAMESPACE": prefix,
        "ROLLOUT_TOPIC_PREFIX": prefix,
        "ROLLOUT_SCENARIO_FILE": str(scenario_file),
        "ROLLOUT_HTTP_PORT": str(_free_port()),
        "ROLLOUT_POLL_TIMEOUT_S": "0.2",
    }
    started: list[subprocess.Popen[bytes]] = []
    yield started, env
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)


def _start(started: list[subprocess.Popen[bytes]], env: dict[str, str]) -> subprocess.Popen[bytes]:
    # The child keeps its own copy of the log file's descriptor; ours is closed at once.
    with _log_path(env, len(started)).open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "rollout_planner.service"], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    started.append(process)
    return process


def _log_path(env: dict[str, str], number: int) -> Path:
    return Path(env["ROLLOUT_SCENARIO_FILE"]).with_name(f"planner-{number}.log")


async def _http_get(port: int, path: str) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    data = await reader.read()
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def _tail(log: Path) -> str:
    return log.read_text()[-3000:]


async def _until_ready(process: subprocess.Popen[bytes], port: int, log: Path) -> None:
    async with asyncio.timeout(30):
        while True:
            assert process.poll() is None, f"the planner exited: {_tail(log)}"
            with contextlib.suppress(OSError):
                if (await _http_get(port, "/readyz"))[0] == 200:
                    return
            await asyncio.sleep(0.2)


async def test_a_killed_planner_process_restarts_and_resumes(
    kafka_bootstrap: str,
    prefix: str,
    bus: KafkaBus,
    planner_process: tuple[list[subprocess.Popen[bytes]], dict[str, str]],
) -> None:
    started, env = planner_process
    port = int(env["ROLLOUT_HTTP_PORT"])
    first = _start(started, env)
    await _until_ready(first, port, _log_path(env, 0))
    assert (await _http_get(port, "/healthz"))[0] == 200
    await release(bus, prefix)
    records = await read_topic(kafka_bootstrap, prefix + STAGE_ADVANCE.name, until=advances_at_least(1))
    _, metrics = await _http_get(port, "/metrics")
    assert b"rollout_planner_batches_emitted_total 1.0" in metrics
    first.kill()  # SIGKILL: no shutdown code runs
    first.wait(10)

    second = _start(started, env)
    await _until_ready(second, port, _log_path(env, 1))
    await FakeFleet(bus, prefix).answer(records)
    records = await read_topic(kafka_bootstrap, prefix + STAGE_ADVANCE.name, until=nodes_handed_out(2))
    # the process's own inputs all handled, so a wrongly repeated batch would be out by now
    await caught_up(kafka_bootstrap, f"{prefix}rollout-planner", [prefix + t.name for t in INPUT_TOPICS])
    records = await read_topic(kafka_bootstrap, prefix + STAGE_ADVANCE.name, until=nodes_handed_out(2))
    assert_canary_decided_once(records, ["c-0", "c-1"])
    second.send_signal(signal.SIGTERM)
    assert second.wait(15) == 0


class _DiesBeforePublishing(KafkaBus):
    """The real bus, except that its first publish raises: the planner stops where a process
    killed after its store write and before its publish would."""

    def __init__(self, bootstrap: str, *, client_id: str) -> None:
        super().__init__(bootstrap, client_id=client_id)
        self.died = False

    async def publish_many(self, messages: Sequence[Outgoing]) -> None:
        if not self.died:
            self.died = True
            raise PermanentError("stopped between the journal write and the publish")
        await super().publish_many(messages)


async def _records_on(bootstrap: str, topic: str) -> int:
    """How many records the topic holds (its end offsets): an idempotent producer adds none by retrying."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        parts = [TopicPartition(topic, p) for p in range(STAGE_ADVANCE.partitions)]
        return sum((await consumer.end_offsets(parts)).values())
    finally:
        await consumer.stop()


async def test_bus_6_a_planner_stopped_between_its_journal_write_and_its_publish_publishes_once_after_a_restart(
    kafka_bootstrap: str, redis_url: str, prefix: str, bus: KafkaBus
) -> None:
    """Over the real broker and Redis: the batch is durable in Redis (checkpoint batch 1 with its
    outbox, nothing marked published) and nothing is on the stage-advance topic; the restarted planner
    publishes the stored outbox before it polls, and the topic then holds exactly one stage advance."""
    clock = ManualClock(START)
    dying = _DiesBeforePublishing(kafka_bootstrap, client_id=f"{prefix}planner")
    store = RedisStore(redis_url, namespace=prefix)
    planner = make_planner(bus=dying, store=store, prefix=prefix, clock=clock)
    try:
        assert await planner.start()
        await release(bus, prefix)
        with pytest.raises(PermanentError, match="between the journal write and the publish"):
            async with asyncio.timeout(60):
                while True:
                    await planner.step()
        await planner.close()
        checkpoint = json.loads(await store.get("planner/checkpoint") or b"{}")
        assert checkpoint["batch"] == 1
        assert [m["topic"] for m in checkpoint["outbox"]].count(prefix + STAGE_ADVANCE.name) == 1
        assert await store.get("planner/published") is None
        assert await _records_on(kafka_bootstrap, prefix + STAGE_ADVANCE.name) == 0
    finally:
        await dying.close()
        await store.close()

    async with kafka_planner(kafka_bootstrap, redis_url, prefix, clock) as resumed:
        assert await resumed.start()  # publishes the stored outbox first
        while await resumed.step():
            pass
        await resumed.close()
    assert await _records_on(kafka_bootstrap, prefix + STAGE_ADVANCE.name) == 1
    [record] = await read_topic(kafka_bootstrap, prefix + STAGE_ADVANCE.name, until=advances_at_least(1))
    assert json.loads(record.value)["stage"] == "canary"
