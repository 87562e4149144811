"""The planner service on the in-memory bus and store: translation, idempotence, dead letters, restarts."""

from __future__ import annotations

import json

import pytest
from planner_harness import (
    NEW,
    START,
    FakeFleet,
    kinds,
    make_planner,
    progress_kinds,
    publish,
    release,
)

from rollout_adapters.memory_bus import MemoryBus
from rollout_adapters.memory_store import MemoryStore
from rollout_common.errors import PermanentError, TransientError
from rollout_common.events import ReleaseTarget
from rollout_common.topics.catalog import DEAD_LETTER, PROGRESS, RELEASE_TARGETS, STAGE_ADVANCE
from rollout_planner.engine import snapshot as engine_snapshot
from rollout_planner.service.checkpoint import SNAPSHOT_KEY, STATUS_KEY, IncompatibleSnapshotError
from rollout_planner.service.clock import ManualClock
from rollout_planner.service.journal import JOURNAL_PREFIX
from rollout_planner.service.lease_keeper import LEASE_KEY
from rollout_planner.service.planner import Planner

pytestmark = pytest.mark.asyncio(loop_scope="session")

P = "t."
DAY = 86400.0


@pytest.fixture
def bus() -> MemoryBus:
    return MemoryBus()


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


async def started(bus: MemoryBus, store: MemoryStore, clock: ManualClock) -> Planner:
    planner = make_planner(bus=bus, store=store, prefix=P, clock=clock)
    assert await planner.start()
    return planner


async def drain(planner: Planner) -> None:
    """Step until a poll brings nothing and no timer is due."""
    while await planner.step():
        pass


def advances(bus: MemoryBus) -> list:  # type: ignore[type-arg]
    return bus.records(P + STAGE_ADVANCE.name)


async def test_release_target_becomes_stage_advance_with_its_command_id(bus, store, clock) -> None:
    planner = await started(bus, store, clock)
    await release(bus, P)
    await drain(planner)

    [record] = advances(bus)
    body = json.loads(record.value)
    assert body["kind"] == "stage_advance" and body["stage"] == "canary" and body["version"] == NEW
    assert record.headers["ce_id"].decode() == body["commandId"]
    assert record.headers["ce_type"] == b"io.rollout.stage_advance.v1"
    assert "rollout_transition" in progress_kinds(bus.records(P + PROGRESS.name))
    status = json.loads(await store.get(STATUS_KEY) or b"{}")
    assert status["stages"][0]["tracks"]["controlPlane"]["state"] == "IN_PROGRESS"
    assert status["rollouts"][0]["state"] == "RUNNING"
    await planner.close()


async def test_a_redelivered_batch_is_applied_once(bus, store, clock) -> None:
    planner = await started(bus, store, clock)
    await release(bus, P)
    bus.fail_next_commit(TransientError("rebalancing"))  # the offsets never reach the group
    await drain(planner)
    await planner.close()
    progress_before = len(bus.records(P + PROGRESS.name))

    # The restart seeks to the checkpoint, past the release target the group never committed: it
    # is not delivered again (the duplicate check stays as the net for anything that still is).
    again = await started(bus, store, clock)
    await drain(again)

    assert len(advances(bus)) == 1
    assert len(bus.records(P + PROGRESS.name)) == progress_before  # not even a DUPLICATE_EVENT notice
    assert again.metrics.duplicates_skipped._value.get() == 0
    await again.close()


async def test_a_malformed_message_is_dead_lettered_and_the_next_one_still_applies(bus, store, clock) -> None:
    planner = await started(bus, store, clock)
    topic = P + RELEASE_TARGETS.name
    await bus.publish(
        topic,
        key=b"regular",
        value=b"{not json",
        headers={
            "ce_specversion": b"1.0",
            "ce_id": b"bad-1",
            "ce_source": b"x",
            "ce_type": b"io.rollout.release_target.v1",
        },
    )
    bad_target = ReleaseTarget.model_construct(event_id="bad-2", channel="regular", targets={"1.30": "nope"})
    await publish(bus, P, RELEASE_TARGETS, bad_target, event_id="bad-2")
    await release(bus, P)
    await drain(planner)

    dead = bus.records(P + DEAD_LETTER.name)
    assert dead[0].value == b"{not json"
    reasons = [d.headers["dlq_reason"].decode() for d in dead]
    assert "not JSON" in reasons[0] and "invalid ReleaseTarget" in reasons[1]
    assert [(d.headers["dlq_topic"], d.headers["dlq_partition"], d.headers["dlq_offset"]) for d in dead] == [
        (topic.encode(), b"0", b"0"),
        (topic.encode(), b"0", b"1"),
    ]
    assert dead[0].headers["ce_id"] == b"bad-1"
    assert len(advances(bus)) == 1
    assert bus.committed(f"{P}planner", topic) == {0: 3}
    await planner.close()


async def test_restart_resumes_from_the_store_without_repeating_decisions(bus, store, clock) -> None:
    planner = await started(bus, store, clock)
    fleet = FakeFleet(bus, P)
    await release(bus, P)
    await drain(planner)
    await planner.close()  # stopped between batches, as a crash after a commit would leave it

    resumed = await started(bus, store, clock)
    await drain(resumed)
    assert len(advances(bus)) == 1, "nothing decided again after the restart"
    await fleet.answer(advances(bus))
    await drain(resumed)
    assert len(advances(bus)) == 2  # the node track of canary follows its control plane
    assert resumed.checkpoint.wake_at is not None
    await resumed.close()


async def test_an_outbox_persisted_but_not_published_is_published_after_a_restart(bus, store, clock) -> None:
    planner = await started(bus, store, clock)
    await release(bus, P)
    bus.fail_next_publish(PermanentError("broker rejected it"))  # dies after the store write
    with pytest.raises(PermanentError):
        await drain(planner)
    await planner.close()
    assert advances(bus) == []

    resumed = await started(bus, store, clock)  # publishes the stored outbox before polling
    [record] = advances(bus)
    await drain(resumed)
    assert advances(bus) == [record]
    assert kinds(bus.records(P + PROGRESS.name)).count("rollout_transition") == 1
    await resumed.close()


async def test_the_soak_timer_fires_after_a_restart_and_qualifies_the_next_stage(bus, store, clock) -> None:
    planner = await started(bus, store, clock)
    fleet = FakeFleet(bus, P)
    await release(bus, P)
    await drain(planner)
    while await fleet.answer(advances(bus)):
        await drain(planner)
    assert {s for s in _stages(bus)} == {"canary"}
    wake_at = planner.checkpoint.wake_at
    assert wake_at == pytest.approx(START + DAY, abs=3600)
    await planner.close()

    clock.advance(DAY + 3600)
    resumed = await started(bus, store, clock)
    await drain(resumed)  # no record arrives: only the stored timer can move it on
    assert "prod" in _stages(bus)
    await resumed.close()


def _stages(bus: MemoryBus) -> list[str]:
    return [json.loads(r.value)["stage"] for r in advances(bus)]


async def test_a_notice_is_published_and_logged_without_upsetting_the_loop(bus, store, clock, caplog) -> None:
    planner = await started(bus, store, clock)
    other = ReleaseTarget(event_id="rel-x", channel="rapid", targets={"1.30": NEW})
    await publish(bus, P, RELEASE_TARGETS, other, event_id="rel-x")
    with caplog.at_level("INFO", logger="rollout.planner"):
        await drain(planner)

    assert progress_kinds(bus.records(P + PROGRESS.name)) == ["notice"]
    [logged] = [r for r in caplog.records if r.getMessage() == "notice"]
    assert logged.command["code"] == "OTHER_CHANNEL"  # type: ignore[attr-defined]
    await planner.close()


async def test_a_store_restored_from_an_older_backup_replays_what_kafka_had_committed(bus, store, clock) -> None:
    planner = await started(bus, store, clock)
    fleet = FakeFleet(bus, P)
    await release(bus, P)
    await drain(planner)
    # After the first decision. Without the lease: this copy would keep it without its TTL (a
    # real backup keeps the TTL, and the lease expires in the restored Redis).
    backup = {key: await store.get(key) for key in await store.keys("") if key != LEASE_KEY}
    await fleet.answer(advances(bus))
    await drain(planner)
    assert len(advances(bus)) == 2
    await planner.close()  # Kafka has committed the results of the first batch

    for key in await store.keys(""):
        await store.delete(key)
    await store.put_many({key: value for key, value in backup.items() if value is not None})
    resumed = await started(bus, store, clock)
    await drain(resumed)
    # The results came back from Kafka (the restart seeks to the checkpoint, behind the committed
    # offset) and were decided on again: the same node-track batch, under the same command id.
    ids = sorted(r.headers["ce_id"] for r in advances(bus))
    assert ids == [b"svc-1/canary/controlPlane/1", b"svc-1/canary/nodes/2", b"svc-1/canary/nodes/2"]
    await resumed.close()


async def test_a_snapshot_of_another_format_is_one_clear_error(bus, store, clock) -> None:
    planner = await started(bus, store, clock)
    await release(bus, P)
    await drain(planner)
    await planner.close()
    snapshot = await store.get(SNAPSHOT_KEY) or b""
    first = f"rollout-snapshot {engine_snapshot.FORMAT_VERSION}\n".encode()
    assert snapshot.startswith(first)
    await store.put(SNAPSHOT_KEY, b"rollout-snapshot 99\n" + snapshot[len(first) :])
    with pytest.raises(IncompatibleSnapshotError, match=f"snapshot format 99 is not {engine_snapshot.FORMAT_VERSION}"):
        await make_planner(bus=bus, store=store, prefix=P, clock=clock).start()


async def test_a_json_snapshot_of_format_3_is_refused_by_its_format(bus, store, clock) -> None:
    """Snapshots before format 4 were JSON: a planner upgraded over one says which format it found."""
    planner = await started(bus, store, clock)
    await planner.close()
    await store.put(SNAPSHOT_KEY, json.dumps({"format": 3, "clusters": []}).encode())
    with pytest.raises(IncompatibleSnapshotError, match="snapshot format 3 is not 4"):
        await make_planner(bus=bus, store=store, prefix=P, clock=clock).start()


async def test_bus_6_a_restart_replays_the_journal_to_exactly_the_state_it_left(bus, store, clock) -> None:
    """Only a base snapshot plus small journal entries are written; replay reaches the same state."""
    planner = await started(bus, store, clock)
    fleet = FakeFleet(bus, P)
    await release(bus, P)
    await drain(planner)
    while await fleet.answer(advances(bus)):
        await drain(planner)
    before = engine_snapshot.dump(planner.state)
    assert planner.checkpoint.batch >= 3
    assert len(await store.keys(JOURNAL_PREFIX)) == planner.checkpoint.batch  # no snapshot since batch 0
    await planner.close()

    resumed = await started(bus, store, clock)
    assert engine_snapshot.dump(resumed.state) == before
    await resumed.close()


async def test_a_snapshot_trims_the_journal_behind_it(bus, store, clock) -> None:
    planner = make_planner(bus=bus, store=store, prefix=P, clock=clock, snapshot_every_batches=2)
    assert await planner.start()
    fleet = FakeFleet(bus, P)
    await release(bus, P)
    await drain(planner)
    while await fleet.answer(advances(bus)):
        await drain(planner)
    assert len(await store.keys(JOURNAL_PREFIX)) < 2
    before = engine_snapshot.dump(planner.state)
    await planner.close()
    resumed = make_planner(bus=bus, store=store, prefix=P, clock=clock, snapshot_every_batches=2)
    assert await resumed.start()
    assert engine_snapshot.dump(resumed.state) == before
    await resumed.close()
