"""The Bus contract: what the shell may rely on, whichever bus it holds.

Every test runs against MemoryBus, against KafkaBus on one real broker and against KafkaBus on a
three-node cluster with replication factor 3 and min.insync.replicas 2 (see conftest.py).
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from typing import Protocol, cast

import pytest

from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.memory_bus import MemoryBus, kafka_partition
from rollout_common.errors import InvalidInputError, PermanentError, TransientError, UnknownTopicError
from rollout_common.ports import Bus, Consumer, Outgoing, Record, TopicSpec

# The bus fixture is built on the session's event loop; its tests must run on that loop too.
pytestmark = pytest.mark.asyncio(loop_scope="session")

# How long a test waits for records that should arrive: long enough for a Kafka group join,
# only ever spent in full when a contract is broken.
ARRIVAL_S = 20.0
# How long a test listens to be sure that nothing more arrives.
QUIET_S = 0.25


class GroupMember(Consumer, Protocol):
    """What both consumers offer beyond the port, for tests that wait on a rebalance."""

    def assignment(self) -> frozenset[tuple[str, int]]: ...


def topic_name(prefix: str, name: str = "events") -> str:
    return f"{prefix}.{name}"


def group_name(prefix: str, name: str) -> str:
    return f"{prefix}.group.{name}"


async def make_topic(bus: Bus, prefix: str, *, partitions: int = 1, name: str = "events") -> str:
    topic = topic_name(prefix, name)
    await bus.ensure_topics([TopicSpec(topic, partitions=partitions)])
    return topic


async def collect(consumer: Consumer, *, count: int, within_s: float = ARRIVAL_S) -> list[Record]:
    """Poll until `count` records arrived, then listen a little longer to catch any extra."""
    got: list[Record] = []
    deadline = time.monotonic() + within_s
    while len(got) < count and time.monotonic() < deadline:
        got += await consumer.poll(timeout_s=0.5)
    got += await consumer.poll(timeout_s=QUIET_S)
    return got


async def wait_for_assignment(
    members: list[GroupMember], *, partitions: frozenset[tuple[str, int]], within_s: float = ARRIVAL_S
) -> None:
    """Poll every member until they own `partitions` between them, each a share of its own."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        owned = [member.assignment() for member in members]
        if all(owned) and frozenset().union(*owned) == partitions and sum(map(len, owned)) == len(partitions):
            return
        # Polling drives the group protocol; nothing is published yet, so nothing is lost.
        await asyncio.gather(*(member.poll(timeout_s=0.2) for member in members))
    pytest.fail(f"no stable split of {sorted(partitions)} among {len(members)} members within {within_s}s")


def by_partition(records: list[Record]) -> dict[int, list[Record]]:
    grouped: dict[int, list[Record]] = defaultdict(list)
    for record in records:
        grouped[record.partition].append(record)
    return grouped


async def test_records_come_back_in_publish_order_within_each_partition(bus: Bus, topic_prefix: str) -> None:
    topic = await make_topic(bus, topic_prefix, partitions=3)
    for seq in range(30):
        await bus.publish(topic, key=f"cluster-{seq % 5}".encode(), value=str(seq).encode())
    consumer = bus.consumer([topic], group=group_name(topic_prefix, "reader"))

    got = await collect(consumer, count=30)

    assert len(got) == 30
    for partition, records in by_partition(got).items():
        assert [r.offset for r in records] == list(range(len(records))), f"partition {partition}"
    per_key: dict[bytes | None, list[int]] = defaultdict(list)
    for record in got:
        per_key[record.key].append(int(record.value))
    assert all(values == sorted(values) for values in per_key.values())


async def test_publish_many_delivers_each_message_once_keeping_each_partitions_order(
    bus: Bus, topic_prefix: str
) -> None:
    """One call, two topics, messages in flight together: what a planner's outbox needs (BUS-6)."""
    commands = await make_topic(bus, topic_prefix, partitions=3, name="commands")
    progress = await make_topic(bus, topic_prefix, name="progress")
    messages = [
        Outgoing(topic=commands if seq % 2 else progress, key=f"c-{seq % 4}".encode(), value=str(seq).encode())
        for seq in range(40)
    ]
    messages.append(Outgoing(topic=progress, key=None, value=b"last", headers={"ce_id": b"\x00\xff"}))
    await bus.publish_many(messages)
    await bus.publish_many([])
    consumer = bus.consumer([commands, progress], group=group_name(topic_prefix, "reader"))

    got = await collect(consumer, count=41)

    assert sorted((r.topic, r.value) for r in got) == sorted((m.topic, m.value) for m in messages)
    per_partition: dict[tuple[str, int], list[bytes]] = defaultdict(list)
    for record in sorted(got, key=lambda r: (r.topic, r.partition, r.offset)):
        per_partition[(record.topic, record.partition)].append(record.value)
    for (topic, partition), values in per_partition.items():
        sent = [m.value for m in messages if m.topic == topic and _partition_of(m, got) == partition]
        assert values == sent, f"{topic}[{partition}]"
    (last,) = [r for r in got if r.value == b"last"]
    assert (last.key, dict(last.headers)) == (None, {"ce_id": b"\x00\xff"})


def _partition_of(message: Outgoing, got: list[Record]) -> int:
    (partition,) = {r.partition for r in got if r.topic == message.topic and r.value == message.value}
    return partition


async def test_publish_many_with_a_record_over_the_size_limit_is_refused_for_good(bus: Bus, topic_prefix: str) -> None:
    topic = await make_topic(bus, topic_prefix)
    with pytest.raises(PermanentError):
        await bus.publish_many([Outgoing(topic=topic, key=b"k", value=b"x" * 2_000_000)])


async def test_a_key_always_lands_on_the_partition_kafkas_default_partitioner_picks(
    bus: Bus, topic_prefix: str
) -> None:
    topic = await make_topic(bus, topic_prefix, partitions=4)
    keys = [f"cluster-{n}".encode() for n in range(12)]
    for round_ in range(2):
        for key in keys:
            await bus.publish(topic, key=key, value=b"%d" % round_)
    consumer = bus.consumer([topic], group=group_name(topic_prefix, "reader"))

    got = await collect(consumer, count=24)

    partitions_of: dict[bytes | None, set[int]] = defaultdict(set)
    for record in got:
        partitions_of[record.key].add(record.partition)
    # The same partition in memory as on the broker: a key's partition never depends on the bus.
    assert partitions_of == {key: {kafka_partition(key, 4)} for key in keys}
    assert len({kafka_partition(key, 4) for key in keys}) > 1


async def test_key_value_and_headers_round_trip_and_headers_are_copied(bus: Bus, topic_prefix: str) -> None:
    topic = await make_topic(bus, topic_prefix)
    headers = {"ce_type": b"rollout.wave.started", "ce_id": b"\x00\xff binary"}
    await bus.publish(topic, key=b"cluster-a", value=b'{"wave": 1}', headers=headers)
    headers["ce_type"] = b"changed after publish"
    await bus.publish(topic, key=None, value=b"no key, no headers")
    consumer = bus.consumer([topic], group=group_name(topic_prefix, "reader"))

    first, second = await collect(consumer, count=2)

    assert (first.topic, first.key, first.value) == (topic, b"cluster-a", b'{"wave": 1}')
    assert dict(first.headers) == {"ce_type": b"rollout.wave.started", "ce_id": b"\x00\xff binary"}
    assert (second.key, second.value, dict(second.headers)) == (None, b"no key, no headers", {})
    assert first.timestamp_ms > 0


async def test_publishing_to_a_topic_never_created_raises_unknown_topic(bus: Bus, topic_prefix: str) -> None:
    missing = topic_name(topic_prefix, "never-created")
    for _ in range(2):
        # Twice: the first attempt must not have created the topic behind our back.
        with pytest.raises(UnknownTopicError):
            await bus.publish(missing, key=b"k", value=b"v")


async def test_a_record_over_the_size_limit_is_refused_for_good(bus: Bus, topic_prefix: str) -> None:
    topic = await make_topic(bus, topic_prefix)
    with pytest.raises(PermanentError):
        await bus.publish(topic, key=b"k", value=b"x" * 2_000_000)


async def test_consuming_a_topic_never_created_raises_unknown_topic(bus: Bus, topic_prefix: str) -> None:
    known = await make_topic(bus, topic_prefix)
    consumer = bus.consumer(
        [known, topic_name(topic_prefix, "never-created")], group=group_name(topic_prefix, "reader")
    )
    with pytest.raises(UnknownTopicError):
        await consumer.poll(timeout_s=0.2)
    await consumer.close()


async def _five_handed_out_two_committed(bus: Bus, topic_prefix: str, *, group: str) -> str:
    """A member took records 0..4 and committed 0..1, then left: a crash mid-work."""
    topic = await make_topic(bus, topic_prefix)
    for seq in range(5):
        await bus.publish(topic, key=b"k", value=b"%d" % seq)
    first = bus.consumer([topic], group=group)
    handed_out = await collect(first, count=5)
    assert [r.value for r in handed_out] == [b"0", b"1", b"2", b"3", b"4"]
    await first.commit(handed_out[:2])
    await first.close()
    return topic


async def test_uncommitted_records_go_to_the_next_member_and_committed_ones_do_not(bus: Bus, topic_prefix: str) -> None:
    group = group_name(topic_prefix, "workers")
    topic = await _five_handed_out_two_committed(bus, topic_prefix, group=group)

    second = bus.consumer([topic], group=group)
    redelivered = await collect(second, count=3)
    assert [r.value for r in redelivered] == [b"2", b"3", b"4"]
    await second.close()


async def test_start_at_seeks_each_partition_behind_or_ahead_of_the_committed_offset(
    bus: Bus, topic_prefix: str
) -> None:
    """A service's own checkpoint wins: behind the committed offset replays, ahead of it skips."""
    topic = await make_topic(bus, topic_prefix, partitions=2)
    keys = (b"a", b"d")
    assert kafka_partition(keys[0], 2) != kafka_partition(keys[1], 2)
    for partition_key in keys:
        for seq in range(5):
            await bus.publish(topic, key=partition_key, value=partition_key + b"%d" % seq)
    group = group_name(topic_prefix, "seek")
    first = bus.consumer([topic], group=group)
    everything = await collect(first, count=10)
    await first.commit(everything)  # the group has committed all ten records
    await first.close()

    part_a = kafka_partition(b"a", 2)
    # Partition of `a`: the checkpoint is at offset 1 (a Redis restored from an old backup);
    # partition of `d`: nothing checkpointed, so the committed offset holds.
    checkpoint = {(topic, part_a): 1}
    second = bus.consumer([topic], group=group, start_at=lambda t, p: checkpoint.get((t, p)))
    replayed = await collect(second, count=4)
    assert [r.value for r in replayed] == [b"a1", b"a2", b"a3", b"a4"]
    await second.close()


async def test_the_group_offset_follows_where_start_at_started_a_partition(bus: Bus, topic_prefix: str) -> None:
    """A planner restarted from a checkpoint ahead of the group's offset (it wrote its batch, then
    died before committing) commits where it started: else the group shows lag on that partition
    until its next record, and a member without a checkpoint replays what was done."""
    group = group_name(topic_prefix, "restarted")
    topic = await _five_handed_out_two_committed(bus, topic_prefix, group=group)  # 2..4 handled, not committed

    restarted = bus.consumer([topic], group=group, start_at=lambda t, p: 5)  # its checkpoint
    assert await restarted.poll(timeout_s=2.0) == []
    await restarted.close()  # nothing read, nothing committed by hand

    await bus.publish(topic, key=b"k", value=b"5")
    plain = bus.consumer([topic], group=group)
    assert [r.value for r in await collect(plain, count=1)] == [b"5"]
    assert await plain.poll(timeout_s=0.5) == []
    await plain.close()


async def test_commit_takes_the_highest_offset_per_partition_whatever_the_order(bus: Bus, topic_prefix: str) -> None:
    topic = await make_topic(bus, topic_prefix)
    for seq in range(4):
        await bus.publish(topic, key=b"k", value=b"%d" % seq)
    group = group_name(topic_prefix, "workers")
    first = bus.consumer([topic], group=group)
    got = await collect(first, count=4)
    await first.commit([got[2], got[0]])
    await first.close()

    second = bus.consumer([topic], group=group)
    assert [r.value for r in await collect(second, count=1)] == [b"3"]
    await second.close()


async def test_two_members_split_the_partitions_and_see_each_record_once(bus: Bus, topic_prefix: str) -> None:
    topic = await make_topic(bus, topic_prefix, partitions=4)
    group = group_name(topic_prefix, "workers")
    members = [cast(GroupMember, bus.consumer([topic], group=group)) for _ in range(2)]
    await wait_for_assignment(members, partitions=frozenset((topic, p) for p in range(4)))

    for seq in range(40):
        await bus.publish(topic, key=f"cluster-{seq}".encode(), value=b"%d" % seq)
    seen: list[list[Record]] = [[], []]
    deadline = time.monotonic() + ARRIVAL_S
    while sum(map(len, seen)) < 40 and time.monotonic() < deadline:
        for member, got in zip(members, seen, strict=True):
            batch = await member.poll(timeout_s=0.2)
            await member.commit(batch)
            got += batch

    values = sorted(int(r.value) for got in seen for r in got)
    assert values == list(range(40))
    partitions = [{r.partition for r in got} for got in seen]
    assert all(partitions) and not partitions[0] & partitions[1]

    # When one leaves, the other takes over all partitions.
    await members[1].close()
    await wait_for_assignment(members[:1], partitions=frozenset((topic, p) for p in range(4)))
    await members[0].close()


async def test_another_group_reads_everything_again(bus: Bus, topic_prefix: str) -> None:
    topic = await make_topic(bus, topic_prefix, partitions=2)
    for seq in range(6):
        await bus.publish(topic, key=b"%d" % seq, value=b"%d" % seq)
    planner = bus.consumer([topic], group=group_name(topic_prefix, "planner"))
    await planner.commit(await collect(planner, count=6))
    await planner.close()

    auditor = bus.consumer([topic], group=group_name(topic_prefix, "auditor"))
    assert sorted(r.value for r in await collect(auditor, count=6)) == [b"%d" % n for n in range(6)]
    await auditor.close()


async def test_consumers_without_a_group_each_read_every_partition_and_commit_nothing(
    bus: Bus, topic_prefix: str
) -> None:
    topic = await make_topic(bus, topic_prefix, partitions=4)
    for seq in range(12):
        await bus.publish(topic, key=f"cluster-{seq}".encode(), value=b"%d" % seq)
    # Unlike two members of one group, two readers without a group do not split the partitions.
    readers = [bus.consumer([topic], group=None) for _ in range(2)]
    for reader in readers:
        got = await collect(reader, count=12)
        assert sorted(int(r.value) for r in got) == list(range(12))
        assert {r.partition for r in got} == {0, 1, 2, 3}
        with pytest.raises(InvalidInputError, match="a consumer without a group has no offsets to commit"):
            await reader.commit(got)
    with pytest.raises(InvalidInputError, match="start_at needs a group"):
        bus.consumer([topic], group=None, start_at=lambda _topic, _partition: 0)
    for reader in readers:
        await reader.close()


async def test_a_new_group_not_from_the_beginning_sees_only_later_records(bus: Bus, topic_prefix: str) -> None:
    topic = await make_topic(bus, topic_prefix)
    await bus.publish(topic, key=b"k", value=b"old")
    consumer = cast(GroupMember, bus.consumer([topic], group=group_name(topic_prefix, "tail"), from_beginning=False))
    await wait_for_assignment([consumer], partitions=frozenset({(topic, 0)}))
    await bus.publish(topic, key=b"k", value=b"new")

    assert [r.value for r in await collect(consumer, count=1)] == [b"new"]
    await consumer.close()


async def test_poll_returns_at_most_max_records(bus: Bus, topic_prefix: str) -> None:
    topic = await make_topic(bus, topic_prefix)
    for seq in range(5):
        await bus.publish(topic, key=b"k", value=b"%d" % seq)
    consumer = bus.consumer([topic], group=group_name(topic_prefix, "reader"))
    first: list[Record] = []
    deadline = time.monotonic() + ARRIVAL_S
    while not first and time.monotonic() < deadline:
        first = await consumer.poll(max_records=2, timeout_s=0.5)

    assert [r.value for r in first] == [b"0", b"1"]
    assert [r.value for r in await collect(consumer, count=3)] == [b"2", b"3", b"4"]
    with pytest.raises(InvalidInputError):
        await consumer.poll(max_records=0)
    await consumer.close()


async def test_poll_without_data_returns_nothing_after_the_timeout(bus: Bus, topic_prefix: str) -> None:
    topic = await make_topic(bus, topic_prefix)
    consumer = bus.consumer([topic], group=group_name(topic_prefix, "reader"))
    await consumer.poll(timeout_s=0.2)  # joins the group

    started = time.monotonic()
    assert await consumer.poll(timeout_s=0.4) == []
    assert 0.35 <= time.monotonic() - started < 3.0
    await consumer.close()


async def test_a_waiting_poll_wakes_up_when_a_record_arrives(bus: Bus, topic_prefix: str) -> None:
    topic = await make_topic(bus, topic_prefix)
    consumer = cast(GroupMember, bus.consumer([topic], group=group_name(topic_prefix, "reader")))
    await wait_for_assignment([consumer], partitions=frozenset({(topic, 0)}))
    await bus.publish(topic, key=b"k", value=b"wake")

    started = time.monotonic()
    got = await consumer.poll(timeout_s=10.0)
    assert [r.value for r in got] == [b"wake"]
    assert time.monotonic() - started < 5.0
    await consumer.close()


async def test_ensure_topics_is_idempotent_and_rejects_zero_partitions(bus: Bus, topic_prefix: str) -> None:
    spec = TopicSpec(topic_name(topic_prefix, "settings"), partitions=2, compacted=True, retention_ms=3_600_000)
    await bus.ensure_topics([spec])
    await bus.ensure_topics([spec])
    await bus.publish(spec.name, key=b"k", value=b"v")
    with pytest.raises(InvalidInputError):
        await bus.ensure_topics([TopicSpec(topic_name(topic_prefix, "empty"), partitions=0)])


async def test_nothing_works_after_close(bus: Bus, topic_prefix: str) -> None:
    topic = await make_topic(bus, topic_prefix)
    consumer = bus.consumer([topic], group=group_name(topic_prefix, "reader"))
    await consumer.close()
    with pytest.raises(PermanentError):
        await consumer.poll(timeout_s=0.1)
    await bus.close()
    with pytest.raises(PermanentError):
        await bus.publish(topic, key=None, value=b"late")


# -- adapter-specific: the hooks and translations the contract above relies on --------------


async def test_memory_bus_raises_an_injected_failure_once_and_stores_nothing() -> None:
    bus = MemoryBus()
    await bus.ensure_topics([TopicSpec("t")])
    bus.fail_next_publish(TransientError("broker away"))
    with pytest.raises(TransientError):
        await bus.publish("t", key=b"k", value=b"lost")
    await bus.publish("t", key=b"k", value=b"kept")
    assert [r.value for r in bus.records("t")] == [b"kept"]

    consumer = bus.consumer(["t"], group="g")
    bus.fail_next_poll(TransientError("rebalancing"))
    with pytest.raises(TransientError):
        await consumer.poll(timeout_s=0)
    got = await consumer.poll(timeout_s=0)
    bus.fail_next_commit(TransientError("coordinator moved"))
    with pytest.raises(TransientError):
        await consumer.commit(got)
    await consumer.commit(got)
    assert bus.committed("g", "t") == {0: 1}
    await bus.close()


async def test_kafka_bus_without_a_broker_raises_transient_errors(unused_tcp_port: int) -> None:
    bus = KafkaBus(f"127.0.0.1:{unused_tcp_port}", client_id="contract-nobroker")
    with pytest.raises(TransientError) as caught:
        await bus.ensure_topics([TopicSpec("t")])
    assert caught.value.__cause__ is not None
    with pytest.raises(TransientError):
        await bus.publish("t", key=None, value=b"v")
    await bus.close()


async def test_kafka_bus_rejects_unknown_security_settings() -> None:
    with pytest.raises(InvalidInputError):
        KafkaBus("127.0.0.1:9092", client_id="c", security={"sasl_password": "typo"})
