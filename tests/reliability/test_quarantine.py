"""BUS-9: an event the planner's decision raises on is set aside; the events around it are applied.

The planner runs on the real broker and Redis with an engine that raises on events naming `poison`
(composed through the planner's `decide` argument, as the service composes the real engine), after
changing the state in place for the batch's other events, as an engine failing halfway would.
"""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.structs import RecordMetadata
from canary_prod import (
    OLD,
    START,
    canary_prod_planner,
    canary_prod_state,
    forget_namespace,
    running_canary_prod_planner,
)
from poison import POISON, RAISED, PoisonError, poison_reason, poisoned_decide
from topic_reader import bodies, read_topic

from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.redis_store import RedisStore
from rollout_common import envelope
from rollout_common.commands import Command
from rollout_common.events import Event, EventBatch, InventoryChange, Readiness
from rollout_common.fleet import Cluster
from rollout_common.topics import ALL
from rollout_common.topics.catalog import DEAD_LETTER, INVENTORY, PROGRESS
from rollout_planner.engine import EngineState
from rollout_planner.engine import decide as engine_decide
from rollout_planner.engine import snapshot as engine_snapshot
from rollout_planner.service.checkpoint import CHECKPOINT_KEY, SNAPSHOT_KEY, Checkpoint
from rollout_planner.service.journal import SNAPSHOT_BATCH_KEY, JournalReplayError, encode_entry, journal_key
from rollout_planner.service.quarantine import EngineFailureError, engine_version, search


def _upsert(name: str) -> InventoryChange:
    return InventoryChange(action="upsert", cluster=Cluster(name=name, labels={"env": "canary"}, version=OLD))


def _seq6(found: list[dict[str, object]]) -> list[str]:
    """The clusters SEQ-6 notices announce, in order."""
    return [str(b["cluster"]) for b in found if b.get("kind") == "notice" and b.get("code") == "SEQ-6"]


async def _restored(bootstrap: str, redis_url: str, prefix: str) -> bytes:
    """The state a restarted planner (with the real engine) restores from the store, as a snapshot."""
    bus = KafkaBus(bootstrap, client_id=f"{prefix}restarted")
    store = RedisStore(redis_url, namespace=prefix)
    planner = canary_prod_planner(bus, store, prefix, name="quarantine")
    try:
        assert await planner.start()
        return engine_snapshot.dump(planner.state)
    finally:
        await planner.close()
        await bus.close()
        await store.close()


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_the_planner_sets_aside_an_event_its_decision_raises_on_and_decides_the_rest(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str
) -> None:
    """BUS-9 end to end: good events before and after the poison in one batch are applied once, the
    poison is one dead letter whose headers are exactly the record's plus where, why, the exception
    and the engine version; it is counted; the planner keeps deciding, and a restart (journal
    replay) reaches the same state without meeting the poison again."""
    prefix = topic_prefix + "."
    admin = KafkaBus(kafka_bootstrap, client_id=f"{prefix}admin")
    await admin.ensure_topics([t.spec(prefix) for t in ALL])
    await admin.close()
    topic = prefix + INVENTORY.name
    # One key, so one partition, produced before the planner starts: one poll, one batch.
    sent = await _produce(kafka_bootstrap, topic, ["can-3", f"{POISON}-1", "can-4"], key=b"batch")
    try:
        async with running_canary_prod_planner(
            kafka_bootstrap, redis_url, prefix, name="quarantine", decide=poisoned_decide, forget=False
        ) as planner:
            found = bodies(
                await read_topic(kafka_bootstrap, prefix + PROGRESS.name, until=lambda rs: len(_seq6(bodies(rs))) >= 2)
            )
            [letter] = await read_topic(kafka_bootstrap, prefix + DEAD_LETTER.name, until=lambda rs: len(rs) >= 1)
            # it keeps deciding: an event after the set-aside one is applied
            await _produce(kafka_bootstrap, topic, ["can-5"], key=b"after")
            after = bodies(
                await read_topic(kafka_bootstrap, prefix + PROGRESS.name, until=lambda rs: len(_seq6(bodies(rs))) >= 3)
            )
            assert set(planner.state.clusters) == {"can-1", "prod-1", "can-3", "can-4", "can-5"}
            registry = planner.metrics.registry
            assert registry.get_sample_value("rollout_planner_quarantined_events_total", {"kind": "inventory"}) == 1
            assert registry.get_sample_value("rollout_planner_dead_letters_total") == 1
            before_restart = engine_snapshot.dump(planner.state)
        # A restart replays the journal, which holds the good events only.
        assert await _restored(kafka_bootstrap, redis_url, prefix) == before_restart
    finally:
        await forget_namespace(redis_url, prefix)
    # each applied once, around the poison (notices may sit on several partitions: order aside)
    assert sorted(_seq6(found)) == ["can-3", "can-4"]
    assert sorted(_seq6(after)) == ["can-3", "can-4", "can-5"]
    _, poison_headers, poison_meta = sent[f"{POISON}-1"]
    assert letter.key == b"batch"
    assert letter.value == sent[f"{POISON}-1"][0]
    assert dict(letter.headers) == {
        **poison_headers,
        "dlq_reason": poison_reason("inventory").encode(),
        "dlq_topic": topic.encode(),
        "dlq_partition": str(poison_meta.partition).encode(),
        "dlq_offset": str(poison_meta.offset).encode(),
        "dlq_source": b"rollout-planner",
        "dlq_error": RAISED.encode(),
        "dlq_engine_version": engine_version().encode(),
    }


async def _produce(
    bootstrap: str, topic: str, names: list[str], *, key: bytes
) -> dict[str, tuple[bytes, dict[str, bytes], RecordMetadata]]:
    """Upserts of these clusters, as any outside producer sends them; what was sent, and where it went."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    await producer.start()
    sent = {}
    try:
        for name in names:
            value, headers = envelope.encode(_upsert(name), event_id=name, source="test", at=START)
            sent[name] = (
                value,
                headers,
                await producer.send_and_wait(topic, value, key=key, headers=list(headers.items())),
            )
    finally:
        await producer.stop()
    return sent


def _readiness(names: list[str]) -> list[Event]:
    return [Readiness(cluster=name, ready=True) for name in names]


def test_the_search_sets_aside_exactly_the_raising_events_at_a_bounded_cost() -> None:
    """BUS-9's bisection, without infrastructure: two poisons among eight events are found, the six
    others applied in their order, from a fresh state each trial, in at most 2 k log2 n + 2 trials."""
    frozen = engine_snapshot.dump(canary_prod_state("search"))
    copies = 0

    def fresh() -> EngineState:
        nonlocal copies
        copies += 1
        return engine_snapshot.load(frozen)

    events = _readiness(["can-1", "prod-1", f"{POISON}-a", "can-1", "prod-1", "can-1", f"{POISON}-b", "prod-1"])
    with pytest.raises(PoisonError) as raised:
        poisoned_decide(fresh(), EventBatch(events=tuple(events)), START)
    found = search(decide=poisoned_decide, fresh=fresh, events=events, fixed=[], now=START, error=raised.value)
    assert [r.event for r in found.rejected] == [events[2], events[6]]
    assert all(str(r.error) == "cannot apply an event naming poison" for r in found.rejected)
    assert found.applied == [e for i, e in enumerate(events) if i not in (2, 6)]
    assert copies - 1 <= 2 * 2 * 3 + 2


def test_an_engine_that_raises_without_any_event_is_not_blamed_on_one() -> None:
    """A state the engine cannot decide from at all is a failure of the engine, not of the events."""

    def broken(state: EngineState, event: Event | EventBatch, now: float) -> tuple[EngineState, list[object]]:
        raise RuntimeError("broken state")

    events = _readiness(["can-1"])
    with pytest.raises(EngineFailureError, match="raises without any event of the batch: RuntimeError: broken state"):
        search(
            decide=broken,  # type: ignore[arg-type]
            fresh=lambda: canary_prod_state("broken"),
            events=events,
            fixed=[],
            now=START,
            error=RuntimeError("broken state"),
        )


def _refusing_can_3(state: EngineState, event: Event | EventBatch, now: float) -> tuple[EngineState, list[Command]]:
    """An engine that raises on what an earlier one applied (as a real bug would: a KeyError)."""
    events = event.events if isinstance(event, EventBatch) else (event,)
    if any("can-3" in e.model_dump_json() for e in events):
        raise KeyError("can-3")
    return engine_decide(state, event, now)


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_a_journal_replay_failure_is_reported_as_the_journals_not_the_snapshots(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str
) -> None:
    """A journaled batch that the engine now raises on, or that cannot be read, stops the start with
    what happened and where (batch, exception, engine version), not as an incompatible snapshot."""
    prefix = topic_prefix + "."
    store = RedisStore(redis_url, namespace=prefix)
    checkpoint = Checkpoint(batch=1)
    entry = encode_entry(batch=1, now=START, events=[_upsert("can-3")])
    try:
        for journaled, decide, expected in (
            (
                entry,
                _refusing_can_3,
                f"replaying the journal's batch 1 raised KeyError: 'can-3' in engine {engine_version()}: this engine "
                "cannot apply events an earlier planner applied; see 'Journal replay failed' in docs/operations.md",
            ),
            (
                b'{"batch": 1, "now": "soon"}',
                engine_decide,
                "the journal entry of batch 1 cannot be read (ValidationError: 2 validation errors for JournalEntry); "
                "it was written by another version of the planner, or damaged: see 'Journal replay failed' in "
                "docs/operations.md",
            ),
        ):
            await store.put_many(
                {
                    SNAPSHOT_KEY: engine_snapshot.dump(canary_prod_state("quarantine")),
                    SNAPSHOT_BATCH_KEY: b"0",
                    CHECKPOINT_KEY: checkpoint.model_dump_json().encode(),
                    journal_key(1): journaled,
                }
            )
            bus = KafkaBus(kafka_bootstrap, client_id=f"{prefix}replay")
            planner = canary_prod_planner(bus, store, prefix, name="quarantine", decide=decide)
            try:
                with pytest.raises(JournalReplayError) as raised:
                    await planner.start()
            finally:
                await planner.close()
                await bus.close()
            assert str(raised.value) == expected
    finally:
        await store.close()
        await forget_namespace(redis_url, prefix)
