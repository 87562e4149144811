"""Bad input on every input topic, against the real broker and Redis: nothing crashes or stalls.

For each topic the planner or the executor reads, a matrix of bad records is produced by a plain
aiokafka producer (as any outside client could), then one good record. Each bad record must end
as a dead letter with a reason (keyed by its case, so each is found), or, when it is valid but odd,
in its documented outcome (docs/security.md, "Bad input"); the dead-letter metric counts exactly
the dead letters; the service is still running; and the good record after them is handled.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiokafka.errors as kerr  # type: ignore[import-untyped]
import pytest
from aiokafka import AIOKafkaProducer
from canary_prod import NEW, OLD, START, canary_prod_fleet, running_canary_prod_planner
from poison import POISON, poison_reason, poisoned_decide
from pydantic import BaseModel
from topic_reader import Message, bodies, read_topic

from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.memory_bus import kafka_partition
from rollout_adapters.redis_store import RedisStore
from rollout_common import envelope
from rollout_common.commands import StageAdvance
from rollout_common.envelope import MAX_VALUE_BYTES
from rollout_common.errors import InvalidInputError
from rollout_common.events import (
    InventoryChange,
    OperatorCommand,
    Readiness,
    ReleaseTarget,
    UpgradeResult,
)
from rollout_common.fleet import Cluster
from rollout_common.heartbeat import Heartbeat
from rollout_common.json_bounds import MAX_DEPTH, MAX_NUMBER_CHARS, MAX_STRING_BYTES
from rollout_common.status import Track
from rollout_common.topics import ALL
from rollout_common.topics.catalog import (
    DEAD_LETTER,
    HEARTBEATS,
    INVENTORY,
    OPERATOR_COMMANDS,
    PROGRESS,
    READINESS,
    RELEASE_TARGETS,
    STAGE_ADVANCE,
    UPGRADE_RESULTS,
    TopicDef,
)
from rollout_executor.drivers.command import CommandDriver
from rollout_executor.drivers.port import DriverOutcome
from rollout_executor.executor import Executor
from rollout_executor.ledger import UpgradeLedger
from rollout_executor.metrics import ExecutorMetrics
from rollout_executor.service import ExecutorService
from rollout_executor.settings import CommandDriverSettings, ExecutorSettings
from rollout_executor.target import UpgradeTarget

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

# Just under the broker's limit (message.max.bytes 1048588) and the producer's (1 MiB), over ours.
HUGE = MAX_VALUE_BYTES + 1000
# A version whose part has 5,000 digits: the pattern alone let it through, then the planner's version
# parser raised on it (Python's 4,300-digit limit), and the monitor republished it every interval.
HUGE_VERSION = "1.31." + "9" * 5000
PART_BOUND = "is not a version: a part of 5000 digits (at most 12)"


@dataclass(frozen=True)
class Case:
    """One bad record, and what must become of it: a dead letter whose reason holds `reason`, or
    (reason None) no dead letter, with `outcome` checked on the progress topic."""

    name: str
    value: bytes
    headers: dict[str, bytes]
    reason: str | None = None
    outcome: Callable[[list[dict[str, Any]]], bool] | None = None
    # a further header with this name, bytes as they are (not UTF-8): sent by kcat, since Kafka
    # clients write header names from text
    raw_header_name: bytes | None = None


def _encoded(model: BaseModel, event_id: str) -> tuple[bytes, dict[str, bytes]]:
    return envelope.encode(model, event_id=event_id, source="bad-input-test", at=START)


def _generic(topic: TopicDef, good: BaseModel) -> list[Case]:
    """The cases every topic gets: broken envelopes and bodies, whatever the model."""
    value, headers = _encoded(good, "generic")
    body = json.loads(value)
    model = type(good).__name__
    wrong = dict(body, unexpected="field")
    missing = {k: v for k, v in body.items() if k not in ("kind",)}
    missing.pop(next(iter(k for k in missing)))  # the first required field
    return [
        Case("not-json", b"\x00{not json", headers, reason="value is not JSON"),
        Case("wrong-schema", json.dumps(wrong).encode(), headers, reason=f"invalid {model}"),
        Case("missing-field", json.dumps(missing).encode(), headers, reason=f"invalid {model}"),
        Case(
            "unknown-ce-type",
            value,
            dict(headers, ce_type=b"io.rollout.bogus.v1"),
            reason="ce_type 'io.rollout.bogus.v1' is not one of",
        ),
        Case("kind-mismatch", json.dumps(dict(body, kind="bogus")).encode(), headers, reason=f"invalid {model}"),
        Case(
            "huge",
            b'{"pad": "' + b"x" * (HUGE - 12) + b'"}',
            headers,
            reason=f"exceeds {MAX_VALUE_BYTES}",
        ),
        Case("no-ce-headers", value, {}, reason="missing CloudEvents header(s)"),
        Case(
            "no-ce-id",
            value,
            {k: v for k, v in headers.items() if k != "ce_id"},
            reason="missing CloudEvents header(s): ce_id",
        ),
        Case("bad-specversion", value, dict(headers, ce_specversion=b"0.3"), reason="ce_specversion '0.3'"),
        Case("header-not-utf8", value, dict(headers, ce_source=b"\xff\xfe"), reason="a header is not UTF-8"),
        # a valid event whose one further header has a name that is not UTF-8: the Kafka client
        # raised on it while unpacking the fetch, on every poll, and nothing behind it was read
        Case(
            "header-name-not-utf8",
            value,
            headers,
            reason="a header is not UTF-8: the name b'\\xff\\xfe'",
            raw_header_name=b"\xff\xfe",
        ),
        *_bounded(body, headers),
    ]


def _bounded(body: dict[str, Any], headers: dict[str, bytes]) -> list[Case]:
    """Records that crashed the consumers before decoding had bounds (BUS-4): each exceeds one."""
    text = json.dumps(body)
    inner = text[1:-1]
    return [
        Case(
            "huge-integer",
            ('{"n": ' + "9" * 5000 + ", " + inner + "}").encode(),
            headers,
            reason=f"value exceeds a bound: a number of 5000 characters (limit {MAX_NUMBER_CHARS})",
        ),
        Case(
            "deep-nesting",
            b"[" * 10_000 + b"]" * 10_000,
            headers,
            reason=f"value exceeds a bound: nesting 10000 deep (limit {MAX_DEPTH})",
        ),
        Case("nan", ('{"n": NaN, ' + inner + "}").encode(), headers, reason="value holds NaN, which JSON does not"),
        Case(
            "infinity",
            ('{"n": -Infinity, ' + inner + "}").encode(),
            headers,
            reason="value holds -Infinity, which JSON does not",
        ),
        Case(
            "long-string",
            ('{"n": "' + "x" * 70_000 + '", ' + inner + "}").encode(),
            headers,
            reason=f"value exceeds a bound: a string of 70002 bytes (limit {MAX_STRING_BYTES})",
        ),
        Case(
            "content-type-not-utf8",
            text.encode(),
            dict(headers, **{"content-type": b"\xc3\x28"}),
            reason="a header is not UTF-8: 'content-type'",
        ),
        Case(
            "structured-without-data",
            json.dumps({k[3:]: v.decode() for k, v in headers.items() if k.startswith("ce_")}).encode(),
            {"content-type": b"application/cloudevents+json"},
            reason="structured CloudEvent without data",
        ),
        Case(
            "neither-mode",
            text.encode(),
            {"content-type": b"application/json"},
            reason="or in structured mode (header content-type: application/cloudevents+json",
        ),
    ]


def _has(kind: str, **fields: Any) -> Callable[[list[dict[str, Any]]], bool]:
    def check(found: list[dict[str, Any]]) -> bool:
        return any(b.get("kind") == kind and all(str(v) in str(b.get(k)) for k, v in fields.items()) for b in found)

    return check


# -- plain clients, as any outside producer or reader ---------------------------------------------


async def _produce_all(bootstrap: str, topic: str, records: list[tuple[bytes, bytes, dict[str, bytes]]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        for key, value, headers in records:
            await producer.send_and_wait(topic, value, key=key, headers=list(headers.items()))
    finally:
        await producer.stop()


async def _read(
    bootstrap: str, topic: str, *, until: Callable[[list[Message]], bool], timeout_s: float = 60.0
) -> list[Message]:
    # a fetch large enough for the oversized cases' dead letters
    return await read_topic(bootstrap, topic, until=until, timeout_s=timeout_s, client={"fetch_max_bytes": 4 << 20})


async def _produce_cases(
    bootstrap: str, topic: TopicDef, prefix: str, cases: list[Case], good: tuple[bytes, bytes, dict[str, bytes]]
) -> None:
    """The cases, then the good record. A case with a raw header name goes by kcat to the good
    record's partition, just before it: the good record's effect shows the partition was read past it."""
    name = prefix + topic.name
    await _produce_all(bootstrap, name, [(c.name.encode(), c.value, c.headers) for c in cases if not c.raw_header_name])
    partition = kafka_partition(good[0], topic.partitions)
    for case in cases:
        if case.raw_header_name:
            await _kcat(bootstrap, name, partition=partition, key=case.name.encode(), case=case)
    await _produce_all(bootstrap, name, [good])


async def _kcat(bootstrap: str, topic: str, *, partition: int, key: bytes, case: Case) -> None:
    assert case.raw_header_name is not None and b"\n" not in case.value
    headers = [*((name.encode(), value) for name, value in case.headers.items()), (case.raw_header_name, b"v")]
    argv = [b"kcat", b"-P", b"-b", bootstrap.encode(), b"-t", topic.encode(), b"-p", str(partition).encode()]
    argv += [b"-k", key, *(arg for name, value in headers for arg in (b"-H", name + b"=" + value))]
    kcat = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE)
    await asyncio.wait_for(kcat.communicate(case.value + b"\n"), 60)
    assert kcat.returncode == 0


def _letters(records: list[Message]) -> dict[str, str]:
    """Dead letters by case name (their key) -> reason."""
    return {r.key.decode(): dict(r.headers)["dlq_reason"].decode() for r in records if r.key}


# -- the planner ----------------------------------------------------------------------------------


def _poison(topic: TopicDef, command_id: str) -> Case:
    """A valid record whose event makes the planner's decision raise."""
    name = f"{POISON}-1"
    model: BaseModel
    if topic is RELEASE_TARGETS:
        model = _release(name)
    elif topic is OPERATOR_COMMANDS:
        model = OperatorCommand(command_id=name, action="pause", all_rollouts=True)
    elif topic is UPGRADE_RESULTS:
        model = _result(command_id, name, "succeeded")
    elif topic is READINESS:
        model = Readiness(cluster=name, ready=True)
    else:
        model = InventoryChange(action="upsert", cluster=Cluster(name=name, labels={"env": "canary"}, version=OLD))
    return Case("handler-raises", *_encoded(model, name), reason=poison_reason(model.kind))


def _release(event_id: str = "rel-1") -> ReleaseTarget:
    return ReleaseTarget(event_id=event_id, channel="regular", targets={"1.30": NEW})


def _result(
    command_id: str, cluster: str, outcome: str, *, version: str = NEW, finished_at: float | None = None
) -> UpgradeResult:
    return UpgradeResult.model_construct(
        command_id=command_id,
        cluster=cluster,
        track=Track.CONTROL_PLANE,
        version=version,
        outcome=outcome,
        error=None,
        finished_at=finished_at,
    )


def _cut(version: str) -> str:
    """A long version as a dead-letter reason quotes it: cut, with its length."""
    return f"{repr(version)[:40]}... ({len(version)} characters)"


def _raw(model: BaseModel, **changes: Any) -> bytes:
    """The model's JSON with fields changed after validation (to send what the model would refuse)."""
    return json.dumps(json.loads(model.model_dump_json(by_alias=True)) | changes).encode()


def _planner_cases(
    topic: TopicDef, command_id: str
) -> tuple[list[Case], BaseModel, Callable[[list[dict[str, Any]]], bool]]:
    """Bad cases specific to the topic, the good message sent after them, and its visible effect."""
    if topic is RELEASE_TARGETS:
        good = _release("rel-good")
        old_value, old_headers = _encoded(_release("rel-1"), "rel-1")
        return (
            [
                Case(
                    "invalid-version",
                    _raw(good, targets={"1.30": "1.31"}),
                    _encoded(good, "x")[1],
                    reason="invalid ReleaseTarget: targets",
                ),
                Case(
                    "huge-version",
                    _raw(good, targets={"1.30": HUGE_VERSION}),
                    _encoded(good, "x")[1],
                    reason=f"invalid ReleaseTarget: targets.1.30: Value error, {_cut(HUGE_VERSION)} {PART_BOUND}",
                ),
                Case(
                    "unknown-channel",
                    *_encoded(ReleaseTarget(event_id="rel-odd", channel="nope", targets={"1.30": NEW}), "rel-odd"),
                    outcome=_has("notice", code="OTHER_CHANNEL"),
                ),
                Case("duplicate", old_value, old_headers, outcome=_has("notice", code="DUPLICATE_EVENT")),
                Case("stale-replay", old_value, old_headers, outcome=_has("notice", code="DUPLICATE_EVENT")),
            ],
            good,
            _has("rollout_transition", reason="rel-good"),
        )
    if topic is OPERATOR_COMMANDS:
        good = OperatorCommand(command_id="cmd-good", action="pause", all_rollouts=True, issued_by="test")
        dup_value, dup_headers = _encoded(OperatorCommand(command_id="cmd-1", action="resume"), "cmd-1")
        return (
            [
                Case(
                    "invalid-version",
                    *_encoded(
                        OperatorCommand(
                            command_id="cmd-v", action="soak_override", stage="canary", version="1.31", soak=0
                        ),
                        "cmd-v",
                    ),
                    outcome=_has("command_ack", commandId="cmd-v", accepted=False),
                ),
                Case(
                    "huge-version",
                    *_encoded(
                        OperatorCommand(
                            command_id="cmd-h", action="soak_override", stage="canary", version=HUGE_VERSION, soak=0
                        ),
                        "cmd-h",
                    ),
                    outcome=_has("command_ack", commandId="cmd-h", accepted=False, reason=PART_BOUND),
                ),
                Case(
                    "unknown-rollout",
                    *_encoded(OperatorCommand(command_id="cmd-u", action="pause", rollout_id="ghost-9"), "cmd-u"),
                    outcome=_has("command_ack", commandId="cmd-u", reason="unknown rollout ghost-9"),
                ),
                Case("negative-soak", _raw(good, action="soak_override", soak=-5), dup_headers, reason="soak"),
                Case("duplicate", dup_value, dup_headers, outcome=_has("command_ack", commandId="cmd-1")),
                Case("stale-replay", dup_value, dup_headers, outcome=_has("command_ack", commandId="cmd-1")),
            ],
            good,
            _has("command_ack", commandId="cmd-good", accepted=True),
        )
    if topic is UPGRADE_RESULTS:
        good_ok = _result(command_id, "can-1", "succeeded")
        stale = _result("bad-1/canary/controlPlane/99", "can-1", "succeeded")
        return (
            [
                Case(
                    "invalid-version",
                    _raw(good_ok, version="not-a-version"),
                    _encoded(good_ok, "x")[1],
                    reason="invalid UpgradeResult: version",
                ),
                Case(
                    "huge-version",
                    _raw(good_ok, version=HUGE_VERSION),
                    _encoded(good_ok, "x")[1],
                    reason=f"invalid UpgradeResult: version: Value error, {_cut(HUGE_VERSION)} {PART_BOUND}",
                ),
                Case(
                    "from-the-future",
                    *_encoded(_result(command_id, "can-1", "succeeded", finished_at=time.time() + 3000), "ahead"),
                    reason="invalid UpgradeResult: finishedAt is ",
                ),
                Case(
                    "unknown-cluster",
                    *_encoded(_result(command_id, "ghost-1", "succeeded"), "u1"),
                    outcome=_has("notice", code="UNKNOWN_CLUSTER", cluster="ghost-1"),
                ),
                Case("duplicate", *_encoded(_result(command_id, "can-1", "started"), "dup")),
                Case("stale-replay", *_encoded(stale, "stale")),
            ],
            good_ok,
            # can-1's control plane done: its node upgrade is handed out (SOAK-1)
            lambda found: any(b.get("kind") == "stage_advance" and b.get("track") == "nodes" for b in found),
        )
    if topic is READINESS:
        good = Readiness(cluster="can-1", ready=False, reason="probe")
        return (
            [
                Case(
                    "unknown-cluster",
                    *_encoded(Readiness(cluster="ghost-2", ready=True), "g2"),
                    outcome=_has("notice", code="UNKNOWN_CLUSTER", cluster="ghost-2"),
                ),
                Case("invalid-value", _raw(good, ready="perhaps"), _encoded(good, "x")[1], reason="invalid Readiness"),
                Case(
                    "huge-version",
                    _raw(good, controlPlaneVersion=HUGE_VERSION),
                    _encoded(good, "x")[1],
                    reason=f"invalid Readiness: controlPlaneVersion: Value error, {_cut(HUGE_VERSION)} {PART_BOUND}",
                ),
                # BUS-7: one record observed "at 1e38" made every later real observation of its
                # cluster older, so its stage waited on GATE-1 for good
                Case(
                    "beyond-any-clock",
                    _raw(good, observedAt=1e38),
                    _encoded(good, "x")[1],
                    reason="invalid Readiness: observedAt: Input should be less than or equal to 253402300799",
                ),
                Case(
                    "from-the-future",
                    *_encoded(Readiness(cluster="can-1", ready=False, observed_at=time.time() + 3000), "ahead"),
                    reason="s ahead of the planner's clock (limit max_future_skew_s=30); check the clock of",
                ),
                # read as infinity by the fast path's JSON parser, and applied
                Case(
                    "infinite-time",
                    b'{"kind": "readiness", "cluster": "can-1", "ready": false, "observedAt": 1e99999}',
                    _encoded(good, "x")[1],
                    reason="value holds 1e99999, which overflows a double",
                ),
                Case("duplicate", *_encoded(Readiness(cluster="prod-1", ready=True), "r-dup")),
                Case("stale-replay", *_encoded(Readiness(cluster="prod-1", ready=True), "r-dup")),
            ],
            good,
            # can-1 (in flight) reported not ready: GATE-1 holds the canary, said on progress
            lambda found: any(b.get("kind") == "wait_changed" for b in found),
        )
    assert topic is INVENTORY
    new = Cluster(name="can-3", labels={"env": "canary"}, version=OLD)
    good = InventoryChange(action="upsert", cluster=new)
    return (
        [
            Case(
                "invalid-version",
                json.dumps({"action": "upsert", "cluster": {"name": "x-1", "version": "1.31"}}).encode(),
                _encoded(good, "x")[1],
                reason="invalid InventoryChange",
            ),
            Case(
                "huge-version",
                json.dumps({"action": "upsert", "cluster": {"name": "x-1", "version": HUGE_VERSION}}).encode(),
                _encoded(good, "x")[1],
                reason=f"invalid InventoryChange: cluster.version: Value error, {_cut(HUGE_VERSION)} {PART_BOUND}",
            ),
            Case(
                "injected-name",
                json.dumps({"action": "upsert", "cluster": {"name": "c1; rm -rf /", "version": OLD}}).encode(),
                _encoded(good, "x")[1],
                reason="not a valid cluster name",
            ),
            Case("unknown-cluster", *_encoded(InventoryChange(action="remove", name="ghost-3"), "rm")),
            Case(
                "duplicate",
                *_encoded(InventoryChange(action="upsert", cluster=canary_prod_fleet()[1]), "same"),
            ),
            Case("stale-replay", *_encoded(InventoryChange(action="upsert", cluster=canary_prod_fleet()[1]), "same")),
        ],
        good,
        _has("notice", code="SEQ-6", cluster="can-3"),
    )


@pytest.mark.parametrize(
    "topic", [RELEASE_TARGETS, OPERATOR_COMMANDS, UPGRADE_RESULTS, READINESS, INVENTORY], ids=lambda t: t.name
)
async def test_the_planner_survives_bad_input(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str, topic: TopicDef
) -> None:
    prefix = topic_prefix + "."
    admin = KafkaBus(kafka_bootstrap, client_id=f"{prefix}admin")
    await admin.ensure_topics([t.spec(prefix) for t in ALL])
    await admin.close()
    async with running_canary_prod_planner(
        kafka_bootstrap, redis_url, prefix, name="bad", decide=poisoned_decide
    ) as planner:
        # A running rollout first, so commands, results and readiness have something to act on.
        value, headers = _encoded(_release("rel-1"), "rel-1")
        await _produce_all(kafka_bootstrap, prefix + RELEASE_TARGETS.name, [(b"regular", value, headers)])
        [advance] = await _read(kafka_bootstrap, prefix + STAGE_ADVANCE.name, until=lambda rs: len(rs) >= 1)
        command_id = json.loads(advance.value)["commandId"]
        if topic is OPERATOR_COMMANDS:  # the command later sent again
            first_value, first_headers = _encoded(OperatorCommand(command_id="cmd-1", action="resume"), "cmd-1")
            await _produce_all(kafka_bootstrap, prefix + topic.name, [(b"all", first_value, first_headers)])
        if topic is UPGRADE_RESULTS:
            value, headers = _encoded(_result(command_id, "can-1", "started"), "started")
            await _produce_all(kafka_bootstrap, prefix + topic.name, [(b"can-1", value, headers)])

        specific, good, processed = _planner_cases(topic, command_id)
        cases = [*_generic(topic, good), *specific, _poison(topic, command_id)]
        await _produce_cases(kafka_bootstrap, topic, prefix, cases, (b"good", *_encoded(good, "good-1")))

        # Keyed by case, the records spread over the topic's partitions: wait for every outcome.
        checks = [processed, *(c.outcome for c in cases if c.outcome is not None)]
        progress = bodies(
            await _read(
                kafka_bootstrap, prefix + PROGRESS.name, until=lambda rs: all(check(bodies(rs)) for check in checks)
            )
        )
        expected = {c.name: c.reason for c in cases if c.reason is not None}
        letters = _letters(
            await _read(kafka_bootstrap, prefix + DEAD_LETTER.name, until=lambda rs: len(_letters(rs)) >= len(expected))
        )
        assert planner.ready
    assert set(letters) == set(expected), "every malformed record, and only those, is a dead letter"
    for name, reason in expected.items():
        assert reason in letters[name], (name, letters[name])
    assert planner.metrics.dead_letters._value.get() == len(expected)
    for case in cases:
        if case.outcome is not None:
            assert case.outcome(progress), (case.name, progress)


async def test_a_record_over_the_broker_limit_is_refused_by_the_producer(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    prefix = topic_prefix + "."
    admin = KafkaBus(kafka_bootstrap, client_id=f"{prefix}admin")
    await admin.ensure_topics([RELEASE_TARGETS.spec(prefix)])
    try:
        with pytest.raises(Exception, match="MessageSizeTooLarge"):
            await admin.publish(prefix + RELEASE_TARGETS.name, key=b"k", value=b"x" * 1_100_000)
    finally:
        await admin.close()
    with pytest.raises(kerr.MessageSizeTooLargeError):
        await _produce_all(kafka_bootstrap, prefix + RELEASE_TARGETS.name, [(b"k", b"x" * 1_100_000, {})])


# -- the executor ---------------------------------------------------------------------------------

# The upgrade program: records its argv, fails for clusters it does not know (as a real one would).
_PROGRAM = (
    "import json, sys; out, cluster = sys.argv[1], sys.argv[2]; open(out, 'a').write(json.dumps(sys.argv[2:]) + '\\n');"
    " sys.exit(0) if cluster.startswith('c-') else (print(f'unknown cluster {cluster}', file=sys.stderr), sys.exit(3))"
)


class RaisingDriver:
    """The command driver, except that it raises for `c-raise`, as a driver with a bug would."""

    name = "raising"

    def __init__(self, inner: CommandDriver) -> None:
        self._inner = inner

    async def upgrade(self, target: UpgradeTarget, *, fencing_token: int) -> DriverOutcome:
        if target.cluster == "c-raise":
            raise RuntimeError("driver bug on c-raise")
        return await self._inner.upgrade(target, fencing_token=fencing_token)


def _advance(command_id: str, clusters: tuple[str, ...], version: str = NEW) -> StageAdvance:
    return StageAdvance(
        command_id=command_id,
        rollout_id="r1",
        stage="canary",
        track=Track.CONTROL_PLANE,
        partition="All",
        version=version,
        clusters=clusters,
    )


async def test_the_executor_survives_bad_input(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str, tmp_path: Path
) -> None:
    prefix = topic_prefix + "."
    calls = tmp_path / "calls.jsonl"
    bus = KafkaBus(kafka_bootstrap, client_id=f"{prefix}executor")
    store = RedisStore(redis_url, namespace=prefix)
    await bus.ensure_topics([t.spec(prefix) for t in ALL])
    metrics = ExecutorMetrics()
    driver = RaisingDriver(
        CommandDriver(CommandDriverSettings(executable=sys.executable, args=("-c", _PROGRAM, str(calls)), timeout_s=30))
    )
    executor = Executor(
        bus=bus,
        ledger=UpgradeLedger(store, executor_id="e1", lease_s=30),
        driver=driver,
        metrics=metrics,
        executor_id="e1",
        topic_prefix=prefix,
        wait_poll_s=0.05,
    )
    settings = ExecutorSettings(topic_prefix=prefix, group_id=f"{prefix}executors", create_topics=False, metrics_port=0)
    service = ExecutorService(settings, bus=bus, executor=executor)
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(stop))
    try:
        first = _advance("cmd-1", ("c-1",))
        good = _advance("cmd-good", ("c-2",))
        cases = [
            *_generic(STAGE_ADVANCE, good),
            Case("unknown-cluster", *_encoded(_advance("cmd-u", ("ghost-1",)), "cmd-u")),
            Case(
                "invalid-version",
                _raw(_advance("cmd-v", ("c-9",)), version="1.31.2; reboot"),
                _encoded(good, "cmd-v")[1],
                reason="invalid StageAdvance: version",
            ),
            Case(
                "injected-name",
                *_encoded(_advance("cmd-i", ("c1; rm -rf /", "$(reboot)", "--help", "my cluster")), "cmd-i"),
            ),
            # a valid command whose handling raises: that cluster's failed upgrade, the others go on
            Case("handler-raises", *_encoded(_advance("cmd-r", ("c-raise", "c-3")), "cmd-r")),
            Case("duplicate", *_encoded(first, "cmd-1")),
            Case("stale-replay", *_encoded(_advance("cmd-old", ("c-1",)), "cmd-old")),
        ]
        value, headers = _encoded(first, "cmd-1")
        await _produce_all(kafka_bootstrap, prefix + STAGE_ADVANCE.name, [(b"first", value, headers)])
        await _read(
            kafka_bootstrap,
            prefix + UPGRADE_RESULTS.name,
            until=lambda rs: any(b["outcome"] == "succeeded" for b in bodies(rs)),
        )
        await _produce_cases(kafka_bootstrap, STAGE_ADVANCE, prefix, cases, (b"good", *_encoded(good, "cmd-good")))

        def finals(rs: list[Message]) -> dict[tuple[str, str], dict[str, Any]]:
            return {(b["commandId"], b["cluster"]): b for b in bodies(rs) if b["outcome"] != "started"}

        # Each case has its own key, so its own partition of the 16: results come in any order.
        injected = ("c1; rm -rf /", "$(reboot)", "--help", "my cluster")
        wanted = {("cmd-good", "c-2"), ("cmd-u", "ghost-1"), ("cmd-old", "c-1"), ("cmd-r", "c-raise"), ("cmd-r", "c-3")}
        wanted |= {("cmd-i", n) for n in injected}
        results = finals(
            await _read(kafka_bootstrap, prefix + UPGRADE_RESULTS.name, until=lambda rs: wanted <= set(finals(rs)))
        )
        expected = {c.name: c.reason for c in cases if c.reason is not None}
        letters = _letters(
            await _read(kafka_bootstrap, prefix + DEAD_LETTER.name, until=lambda rs: len(_letters(rs)) >= len(expected))
        )
        assert not task.done(), "the executor stopped"
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        await bus.close()
        await store.close()
    assert set(letters) == set(expected)
    for name, reason in expected.items():
        assert reason in letters[name], (name, letters[name])
    assert metrics.dead_letters._value.get() == len(expected)
    assert results[("cmd-good", "c-2")]["outcome"] == "succeeded"
    assert results[("cmd-r", "c-raise")]["outcome"] == "failed"
    assert results[("cmd-r", "c-raise")]["error"] == "executor error: RuntimeError: driver bug on c-raise"
    assert results[("cmd-r", "c-3")]["outcome"] == "succeeded"
    # BUS-7: a final result says when the executor saw it
    assert all(r["finishedAt"] is not None for r in results.values())
    assert results[("cmd-u", "ghost-1")]["outcome"] == "failed"
    assert "unknown cluster ghost-1" in results[("cmd-u", "ghost-1")]["error"]
    for name in injected:
        assert results[("cmd-i", name)]["error"].startswith("rejected:"), name
    # The duplicate and the stale command re-publish c-1's recorded result; the program ran once
    # for it, never for a rejected name, and always with the argv as a list.
    assert results[("cmd-old", "c-1")]["outcome"] == "succeeded"
    assert metrics.replayed._value.get() >= 2
    ran = [json.loads(line) for line in calls.read_text().splitlines()]
    assert sorted(ran) == sorted(
        [
            ["c-1", "controlPlane", NEW],
            ["ghost-1", "controlPlane", NEW],
            ["c-2", "controlPlane", NEW],
            ["c-3", "controlPlane", NEW],
        ]
    )


# -- the health monitor ---------------------------------------------------------------------------


@contextlib.contextmanager
def _monitor_process(bootstrap: str, prefix: str, *, data_dir: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`python -m rollout_health monitor`, stopped (with its faust worker) at the end."""
    env = {
        **os.environ,
        "ROLLOUT_KAFKA_BOOTSTRAP": bootstrap,
        "ROLLOUT_TOPIC_PREFIX": prefix,
        "ROLLOUT_DATA_DIR": str(data_dir),
        "ROLLOUT_REPUBLISH_INTERVAL_S": "0",  # only changes on the readiness topic
    }
    process = subprocess.Popen([sys.executable, "-m", "rollout_health", "monitor"], env=env, start_new_session=True)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)  # the supervisor and its worker
                process.wait()


async def test_the_monitor_survives_bad_input(kafka_bootstrap: str, topic_prefix: str, tmp_path: Path) -> None:
    """BUS-4 on rollout.cluster-heartbeats (the monitor's only input), and BUS-7's future bound: every
    bad record is one dead letter with its reason, and a good heartbeat sent after them all becomes
    readiness carrying its observation time."""
    prefix = topic_prefix + "."
    admin = KafkaBus(kafka_bootstrap, client_id=f"{prefix}admin")
    await admin.ensure_topics([t.spec(prefix) for t in ALL])
    await admin.close()
    now = time.time()
    good = Heartbeat(cluster="c9", ready=True, observed_at=now, reporter="test")
    ahead = Heartbeat(cluster="c8", ready=True, observed_at=now + 3000, reporter="test")
    cases = [
        *_generic(HEARTBEATS, good),
        Case(
            "from-the-future",
            *_encoded(ahead, "ahead"),
            reason="s ahead of the monitor's clock (limit max_future_skew_s=30); check the reporter's clock",
        ),
        # refused at the edge: the monitor passed it on and the planner's version parser raised on
        # each of its republications
        Case(
            "huge-version",
            *_encoded(Heartbeat.model_construct(**dict(good, control_plane_version="v" + HUGE_VERSION)), "huge"),
            reason="invalid Heartbeat: controlPlaneVersion: Value error, 'v1.31.9999",
        ),
        Case(
            "infinite-time",
            b'{"kind": "heartbeat", "cluster": "c7", "ready": true, "observedAt": 1e99999}',
            _encoded(good, "x")[1],
            reason="value holds 1e99999, which overflows a double",
        ),
    ]
    with _monitor_process(kafka_bootstrap, prefix, data_dir=tmp_path / "monitor-data") as process:
        await _produce_cases(kafka_bootstrap, HEARTBEATS, prefix, cases, (b"c9", *_encoded(good, "good")))
        expected = {c.name: c.reason for c in cases if c.reason is not None}
        letters = _letters(
            await _read(kafka_bootstrap, prefix + DEAD_LETTER.name, until=lambda rs: len(_letters(rs)) >= len(expected))
        )
        [ready] = bodies(await _read(kafka_bootstrap, prefix + READINESS.name, until=lambda rs: len(rs) >= 1))
        assert process.poll() is None, "the monitor stopped"
    assert set(letters) == set(expected)
    for name, reason in expected.items():
        assert reason in letters[name], (name, letters[name])
    assert ready == {
        "kind": "readiness",
        "cluster": "c9",
        "ready": True,
        "reason": "reported ready",
        "observedAt": now,
        "controlPlaneVersion": None,  # the heartbeat carried no versions (a probe that reads none)
        "nodeVersion": None,
    }


# -- the Kafka adapter -----------------------------------------------------------------------------


async def test_a_header_name_that_is_not_utf8_is_read_and_the_poll_goes_on(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    """BUS-4: the Kafka client raised while unpacking a fetch holding a record whose header name is
    not UTF-8, on every poll, losing the records fetched with it (those before it on its partition,
    and other partitions' drained by the same poll). Now every record is delivered in order, the
    bad one with its name's bytes as lone surrogates, for the consumer's decoder to refuse."""
    prefix = topic_prefix + "."
    topic = prefix + UPGRADE_RESULTS.name
    bus = KafkaBus(kafka_bootstrap, client_id=f"{prefix}reader")
    await bus.ensure_topics([UPGRADE_RESULTS.spec(prefix)])
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:
        for key, partition in ((b"a1", 0), (b"a2", 0), (b"b1", 1)):
            await producer.send_and_wait(topic, b"{}", key=key, partition=partition)
        bad = Case("bad", b"{}", {"h": b"1"}, raw_header_name=b"\xff\xfe")
        await _kcat(kafka_bootstrap, topic, partition=0, key=b"bad", case=bad)
        for key, partition in ((b"a3", 0), (b"b2", 1)):
            await producer.send_and_wait(topic, b"{}", key=key, partition=partition)
    finally:
        await producer.stop()
    consumer = bus.consumer([topic], group=f"{prefix}readers", from_beginning=True)
    read = []
    try:
        async with asyncio.timeout(60):
            while len(read) < 6:
                read += await consumer.poll(timeout_s=0.5)
    finally:
        await consumer.close()
        await bus.close()
    by_partition = {p: [(r.offset, r.key) for r in read if r.partition == p] for p in (0, 1)}
    assert by_partition == {0: [(0, b"a1"), (1, b"a2"), (2, b"bad"), (3, b"a3")], 1: [(0, b"b1"), (1, b"b2")]}
    [unreadable] = [r for r in read if r.key == b"bad"]
    assert dict(unreadable.headers) == {"h": b"1", "\udcff\udcfe": b"v"}
    with pytest.raises(InvalidInputError, match=r"a header is not UTF-8: the name b'\\xff\\xfe'"):
        envelope.decode(unreadable.value, unreadable.headers, UPGRADE_RESULTS.models)
