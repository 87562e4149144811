"""The planner's path to the broker (issue 21): nothing is published before its decision is durable
(BUS-6), the status document is encoded only after the commands went out, and a poll decoded while
the batch before it was written is decided once, after a restart too."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable, Mapping

import pytest
from planner_harness import START, make_planner, publish, release

from rollout_adapters.memory_bus import MemoryBus
from rollout_adapters.memory_store import MemoryStore
from rollout_common.errors import PermanentError, TransientError
from rollout_common.events import ReleaseTarget
from rollout_common.ports import Record
from rollout_common.topics.catalog import DEAD_LETTER, RELEASE_TARGETS, STAGE_ADVANCE
from rollout_planner.service import planner as planner_module
from rollout_planner.service.checkpoint import CHECKPOINT_KEY, STATUS_KEY
from rollout_planner.service.clock import ManualClock
from rollout_planner.service.planner import Planner

pytestmark = pytest.mark.asyncio(loop_scope="session")

P = "t."


async def _started(bus: MemoryBus, store: MemoryStore, **settings: object) -> Planner:
    planner = make_planner(bus=bus, store=store, prefix=P, clock=ManualClock(START), **settings)
    assert await planner.start()
    return planner


async def _drain(planner: Planner) -> None:
    while await planner.step():
        pass


async def _status_batch(store: MemoryStore) -> int:
    return int(json.loads(await store.get(STATUS_KEY) or b"{}")["batch"])


async def test_bus_6_a_batch_whose_publish_failed_is_durable_but_its_status_is_not_encoded_yet() -> None:
    """The journal and checkpoint of batch 1 are stored before anything is published; the publish
    fails, and the status document, which waits for the publish, still describes batch 0. After a
    restart the stored outbox goes out first, and then the status describes batch 1."""
    bus, store = MemoryBus(), MemoryStore()
    planner = await _started(bus, store)
    await release(bus, P)
    bus.fail_next_publish(PermanentError("broker rejected it"))
    with pytest.raises(PermanentError):
        await _drain(planner)
    await planner.close()
    checkpoint = json.loads(await store.get(CHECKPOINT_KEY) or b"{}")
    assert (checkpoint["batch"], len(checkpoint["outbox"])) == (1, 6)
    assert bus.records(P + STAGE_ADVANCE.name) == []
    assert await _status_batch(store) == 0

    resumed = await _started(bus, store)
    assert len(bus.records(P + STAGE_ADVANCE.name)) == 1
    assert await _status_batch(store) == 1
    await resumed.close()


async def test_bus_6_a_poll_decoded_while_the_batch_before_it_was_written_is_decided_once_after_a_restart() -> None:
    """One record per poll: the release is decided and written, and the malformed record behind it
    is polled and decoded during that write. The planner stops before deciding it: nothing of it
    was stored or published, so the restarted planner reads it again and dead-letters it once."""
    bus, store = MemoryBus(), MemoryStore()
    planner = await _started(bus, store, poll_max_records=1)  # creates the topics; polls nothing yet
    await release(bus, P)
    bad = ReleaseTarget.model_construct(event_id="bad-1", channel="regular", targets={"1.30": "nope"})
    await publish(bus, P, RELEASE_TARGETS, bad, event_id="bad-1")
    assert await planner.step() == 1
    assert (len(bus.records(P + STAGE_ADVANCE.name)), len(bus.records(P + DEAD_LETTER.name))) == (1, 0)
    await planner.close()
    assert json.loads(await store.get(CHECKPOINT_KEY) or b"{}")["offsets"] == {P + RELEASE_TARGETS.name + ":0": 1}

    resumed = await _started(bus, store, poll_max_records=1)
    await _drain(resumed)
    await resumed.close()
    assert len(bus.records(P + STAGE_ADVANCE.name)) == 1
    [dead] = bus.records(P + DEAD_LETTER.name)
    assert dead.headers["dlq_offset"] == b"1"
    assert bus.committed(f"{P}planner", P + RELEASE_TARGETS.name) == {0: 2}


class _FailsOnce(MemoryBus):
    """The real in-memory bus, except that one publish, `at` publishes from arming, fails for a while."""

    def __init__(self) -> None:
        super().__init__()
        self.calls, self.fail_at = 0, -1

    def arm(self, at: int) -> None:
        self.fail_at = self.calls + at

    async def publish(
        self, topic: str, *, key: bytes | None, value: bytes, headers: Mapping[str, bytes] | None = None
    ) -> None:
        self.calls += 1
        if self.calls == self.fail_at:
            raise TransientError("the broker is restarting")
        await super().publish(topic, key=key, value=value, headers=headers)


def _ids(records: list[Record]) -> list[tuple[str, bytes]]:
    return [(r.topic, r.headers["ce_id"]) for r in records]


async def test_bus_3_an_outbox_whose_fourth_message_failed_goes_out_whole_again_nothing_lost() -> None:
    """The outbox is published in one call, all in flight at once; a transient failure part-way
    retries the whole outbox with the same ids, so its first three messages go out twice (consumers
    drop the repeat by id) and every message goes out at least once."""
    bus, store = _FailsOnce(), MemoryStore()
    planner = await _started(bus, store, retry_backoff_s=0.01)
    await release(bus, P)
    bus.arm(4)
    await _drain(planner)
    outbox = json.loads(await store.get(CHECKPOINT_KEY) or b"{}")["outbox"]
    expected = [(m["topic"], base64.b64decode(m["headers"]["ce_id"])) for m in outbox]
    published = [record for topic in sorted({topic for topic, _ in expected}) for record in bus.records(topic)]
    assert (json.loads(await store.get(CHECKPOINT_KEY) or b"{}")["batch"], len(expected)) == (1, 6)
    assert sorted(_ids(published)) == sorted(expected[:3] + expected)
    await planner.close()


async def test_the_next_batch_is_decided_and_published_while_the_last_ones_offset_commit_is_unanswered() -> None:
    """Issue 21: an offset commit (a round trip to the group coordinator, 10 ms and more on Kafka 4)
    no longer sits between a batch's publish and the next poll, nor holds the next batch. One
    commit is in flight at a time, the next carries every batch taken since, and `close` waits."""
    bus, store = MemoryBus(), MemoryStore()
    planner = await _started(bus, store, poll_max_records=1)
    held = bus.hold_commits()
    await release(bus, P)
    first = asyncio.create_task(planner.step())
    await _until(first.done, "the step returned while its offset commit waits")
    assert (first.result(), len(bus.records(P + STAGE_ADVANCE.name))) == (1, 1)
    bad = ReleaseTarget.model_construct(event_id="bad-1", channel="regular", targets={"1.30": "nope"})
    await publish(bus, P, RELEASE_TARGETS, bad, event_id="bad-1")
    # decided and published (a dead letter) while the first commit still waits; its own offsets
    # wait for the next commit, made once the one in flight is answered
    assert await asyncio.wait_for(planner.step(), timeout=10) == 1
    assert len(bus.records(P + DEAD_LETTER.name)) == 1
    assert bus.committed(f"{P}planner", P + RELEASE_TARGETS.name) == {}
    held.set()
    await asyncio.wait_for(planner.commits_settled(), timeout=10)
    assert bus.committed(f"{P}planner", P + RELEASE_TARGETS.name) == {0: 2}
    await planner.close()
    assert bus.committed(f"{P}planner", P + RELEASE_TARGETS.name) == {0: 2}


async def _until(condition: Callable[[], bool], what: str, within_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + within_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"not within {within_s} s: {what}"
        await asyncio.sleep(0.005)


async def test_a_stop_gives_up_a_commit_the_coordinator_does_not_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A broker that is down must not hold a stop: the commit in flight is given up after
    `COMMIT_ON_CLOSE_S` (harmless, the checkpoint skips the records when they come again)."""
    monkeypatch.setattr(planner_module, "COMMIT_ON_CLOSE_S", 0.05)
    bus, store = MemoryBus(), MemoryStore()
    planner = await _started(bus, store)
    bus.hold_commits()  # never answered
    await release(bus, P)
    assert await planner.step() == 1
    await asyncio.wait_for(planner.close(), timeout=10)
    assert bus.committed(f"{P}planner", P + RELEASE_TARGETS.name) == {}
    assert len(bus.records(P + STAGE_ADVANCE.name)) == 1
