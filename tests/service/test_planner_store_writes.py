"""One store write per poll (issue 21): a batch's journal carries the mark of the outbox published
before it, instead of the mark taking a round trip of its own; nothing published is left unmarked
by an idle planner or a clean stop, so a restart re-publishes nothing (BUS-6)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import pytest
from planner_harness import OLD, START, FakeFleet, release, settings

from rollout_adapters.memory_bus import MemoryBus
from rollout_adapters.memory_store import MemoryStore
from rollout_adapters.redis_store import RedisStore
from rollout_common.fleet import Cluster
from rollout_common.sequence import Sequence as StageSequence
from rollout_common.topics.catalog import STAGE_ADVANCE
from rollout_planner.engine import EngineState, new_state
from rollout_planner.service.checkpoint import CHECKPOINT_KEY, PUBLISHED_KEY, SEQUENCE_KEY, STATUS_KEY
from rollout_planner.service.clock import ManualClock
from rollout_planner.service.planner import Planner

pytestmark = pytest.mark.asyncio(loop_scope="session")

P = "w."
QUIET = {"status_interval_s": 3600.0, "snapshot_every_batches": 1000, "snapshot_interval_s": 3600.0}


class CountingStore(MemoryStore):
    """The in-memory store, recording which keys each of the planner's fenced writes carried."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[frozenset[str]] = []

    async def put_many_fenced(
        self, items: Mapping[str, bytes], *, fence_key: str, token: bytes, delete: Sequence[str] = ()
    ) -> bool:
        self.writes.append(frozenset(items))
        return await super().put_many_fenced(items, fence_key=fence_key, token=token, delete=delete)


def _one_at_a_time() -> Callable[[], Awaitable[EngineState]]:
    """Six clusters in one stage, one upgrade at a time: batches of a single stage-advance."""
    sequence = StageSequence.model_validate(
        {
            "name": "one",
            "channel": "regular",
            "stages": [{"name": "all", "clusterSelector": {}, "rolloutStrategy": {"maxUnavailable": 1}}],
        }
    )

    async def initial() -> EngineState:
        return new_state(sequence, [Cluster(name=f"c-{i}", labels={}, version=OLD) for i in range(6)])

    return initial


def _planner(bus: MemoryBus, store: MemoryStore) -> Planner:
    return Planner(
        bus=bus, store=store, settings=settings(P, **QUIET), clock=ManualClock(START), initial_state=_one_at_a_time()
    )


def _shape(keys: frozenset[str]) -> set[str]:
    """Journal keys named by kind, so a test reads which items went together."""
    return {"journal" if key.startswith("planner/journal") else key for key in keys}


async def _step_writes(planner: Planner, store: CountingStore) -> tuple[int, list[set[str]]]:
    before = len(store.writes)
    handled = await planner.step()
    return handled, [_shape(keys) for keys in store.writes[before:]]


async def _published(store: MemoryStore) -> int:
    return int(await store.get(PUBLISHED_KEY) or b"0")


async def test_bus_6_a_stage_advance_batch_costs_one_store_write_carrying_the_previous_mark() -> None:
    """Batches of stage-advances only (no status change) are each one write: the journal entry and
    checkpoint, with the mark of the batch published before it. The idle poll after the last one
    marks it, and a restart publishes nothing again."""
    bus, store = MemoryBus(), CountingStore()
    planner = _planner(bus, store)
    assert await planner.start()
    await release(bus, P)
    fleet = FakeFleet(bus, P)
    seen: list[list[set[str]]] = []
    while True:
        handled, writes = await _step_writes(planner, store)
        seen.append(writes)
        await fleet.answer(bus.records(P + STAGE_ADVANCE.name))
        if handled == 0:
            break
    await planner.close()
    decided = [w for w in seen if any("journal" in keys for keys in w)]
    assert decided, "the planner decided nothing"
    # A batch whose commands change the status (the release: stage transitions) writes its journal,
    # then the status with its own mark; a batch of stage-advances alone writes only its journal,
    # which carries the mark of the batch before it when that one was not marked yet.
    assert decided[0] == [{"journal", CHECKPOINT_KEY, SEQUENCE_KEY}, {STATUS_KEY, PUBLISHED_KEY}]
    one_write = [w for w in decided if len(w) == 1]
    assert one_write, f"no batch took a single write: {decided}"
    assert all(w[0] >= {"journal", CHECKPOINT_KEY} for w in one_write)
    checkpoint_batch = int(planner.checkpoint.batch)
    assert await _published(store) == checkpoint_batch

    advances = len(bus.records(P + STAGE_ADVANCE.name))
    resumed = _planner(bus, store)
    assert await resumed.start()
    await resumed.close()
    assert len(bus.records(P + STAGE_ADVANCE.name)) == advances


async def test_bus_6_an_outbox_published_but_not_marked_goes_out_again_after_a_crash_with_the_same_ids() -> None:
    """The mark waits for the next write: a planner that dies between its publish and that write
    leaves the outbox to be published again at the next start, under the same command ids, which
    executors drop (BUS-3). Nothing is lost either way."""
    bus, store = MemoryBus(), CountingStore()
    planner = _planner(bus, store)
    assert await planner.start()
    await release(bus, P)
    fleet = FakeFleet(bus, P)
    await planner.step()
    await fleet.answer(bus.records(P + STAGE_ADVANCE.name))
    while not planner.mark_pending:  # the window under test
        assert await planner.step() > 0, "no batch left its mark pending"
        await fleet.answer(bus.records(P + STAGE_ADVANCE.name))
    # Dies here: `close` lets the lease go (as its lapse would) and writes nothing; no stop snapshot.
    await planner.close()
    ids_before = [r.value for r in bus.records(P + STAGE_ADVANCE.name)]
    assert await _published(store) < planner.checkpoint.batch

    resumed = _planner(bus, store)
    assert await resumed.start()
    await resumed.close()
    again = Counter(r.value for r in bus.records(P + STAGE_ADVANCE.name)) - Counter(ids_before)
    # the last outbox once more, byte for byte (the records come back by partition, not in order)
    assert sum(again.values()) >= 1 and set(again) <= set(ids_before)
    assert await _published(store) == resumed.checkpoint.batch


async def _prefetch_order(store: MemoryStore | RedisStore, journals_sent: Callable[[], int]) -> list[str]:
    """Two releases, one record a poll: how many journal writes had gone out since the planner
    started when each poll was decoded (the second poll is the prefetch made while the first batch
    is written)."""
    bus = MemoryBus()
    planner = Planner(
        bus=bus,
        store=store,
        settings=settings(P, poll_max_records=1, **QUIET),
        clock=ManualClock(START),
        initial_state=_one_at_a_time(),
    )
    order: list[str] = []
    try:
        assert await planner.start()
        decode = planner._decision.decode
        before = journals_sent()

        def logged_decode(*args: Any, **kwargs: Any) -> Any:
            taken = decode(*args, **kwargs)
            order.append(f"decode {len(taken.records)} after {journals_sent() - before} journal write(s)")
            return taken

        planner._decision.decode = logged_decode  # type: ignore[method-assign]
        await release(bus, P, event_id="rel-1")
        await release(bus, P, event_id="rel-2")
        assert await planner.step() == 1
    finally:
        await planner.close()
    return order


async def test_bus_6_a_batch_is_on_its_way_to_the_store_before_the_next_poll_is_decoded() -> None:
    """The next poll is decoded while the store writes the batch before it: the write is sent
    first (the decoding touches no state, and that batch is decided only after this one went out)."""
    store = CountingStore()
    order = await _prefetch_order(store, lambda: sum("journal" in _shape(keys) for keys in store.writes))
    assert order[:2] == ["decode 1 after 0 journal write(s)", "decode 1 after 1 journal write(s)"]


@pytest.mark.integration
async def test_bus_6_on_a_real_redis_the_batchs_write_is_on_the_wire_before_the_next_poll_is_decoded(
    redis_url: str, topic_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As above, through redis-py's asyncio client, which takes more than one turn of the loop to
    put a command on its socket (it looks at the connection first): what the planner yields before
    it decodes must be enough for that client, or the write waits behind the decoding."""
    on_the_wire: list[bytes] = []
    writelines = asyncio.StreamWriter.writelines

    def sent(writer: asyncio.StreamWriter, data: Any) -> None:
        on_the_wire.append(b"".join(data))
        writelines(writer, data)

    store = RedisStore(redis_url, namespace=f"{topic_prefix}.wire")
    monkeypatch.setattr(asyncio.StreamWriter, "writelines", sent)
    try:
        order = await _prefetch_order(store, lambda: sum(b"planner/journal/" in c for c in on_the_wire))
    finally:
        await store.close()
    assert order[:2] == ["decode 1 after 0 journal write(s)", "decode 1 after 1 journal write(s)"]
