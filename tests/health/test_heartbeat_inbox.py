"""How the heartbeats faust fetched reach the monitor's agent: one batch on the stream's queue for
what arrived while the agent was busy, never mixing two consumer generations, and bounded."""

from __future__ import annotations

import asyncio

import faust
from faust.types import TP, Message

from rollout_health.heartbeat_inbox import HeartbeatBatch, HeartbeatInbox

TOPIC = "rollout.cluster-heartbeats"


def _message(offset: int, *, generation: int = 1) -> Message:
    return Message(TOPIC, 0, offset, 0.0, 0, [], b"c1", b"{}", None, tp=TP(TOPIC, 0), generation_id=generation)


def _inbox(batch_max: int = 3) -> tuple[HeartbeatInbox, faust.App]:
    app = faust.App("inbox-test", broker="kafka://127.0.0.1:1")
    app.flow_control.resume()  # as a worker's is once its partitions are assigned
    return HeartbeatInbox(app, topic=TOPIC, batch_max=batch_max), app


async def test_what_arrives_while_the_agent_is_busy_is_one_batch_on_the_queue() -> None:
    inbox, _ = _inbox()
    queue: asyncio.Queue[HeartbeatBatch] = asyncio.Queue()
    handle = inbox._handler(queue)
    for offset in range(5):
        await handle(_message(offset))

    first, second = queue.get_nowait(), queue.get_nowait()
    assert [m.offset for m in first] == [0, 1, 2]  # full at batch_max: the next one starts a batch
    assert [m.offset for m in second] == [3, 4]
    inbox.taken(first)
    inbox.taken(second)
    await handle(_message(5))
    assert [m.offset for m in queue.get_nowait()] == [5]  # taken: a new batch, not the taken one
    assert queue.empty()


async def test_a_new_consumer_generation_starts_a_new_batch() -> None:
    inbox, _ = _inbox(batch_max=10)
    queue: asyncio.Queue[HeartbeatBatch] = asyncio.Queue()
    handle = inbox._handler(queue)
    await handle(_message(0, generation=1))
    await handle(_message(1, generation=2))

    old, new = queue.get_nowait(), queue.get_nowait()
    assert (old.generation_id, [m.offset for m in old]) == (1, [0])
    assert (new.generation_id, [m.offset for m in new]) == (2, [1])


async def test_the_hand_over_waits_while_four_batches_of_messages_are_not_taken() -> None:
    inbox, _ = _inbox(batch_max=1)
    queue: asyncio.Queue[HeartbeatBatch] = asyncio.Queue()
    handle = inbox._handler(queue)
    for offset in range(4):
        await handle(_message(offset))
    waiting = asyncio.ensure_future(handle(_message(4)))
    await asyncio.sleep(0.01)
    assert not waiting.done() and queue.qsize() == 4

    inbox.taken(queue.get_nowait())
    await asyncio.wait_for(waiting, timeout=10)
    assert queue.qsize() == 4


async def test_after_a_revocation_the_next_message_starts_a_new_batch() -> None:
    inbox, _ = _inbox(batch_max=10)
    queue: asyncio.Queue[HeartbeatBatch] = asyncio.Queue()
    handle = inbox._handler(queue)
    await handle(_message(0))
    queue.get_nowait()  # faust clears the stream queues on a revocation: that batch is gone
    inbox.reset()
    await handle(_message(1))
    assert [m.offset for m in queue.get_nowait()] == [1]


async def test_when_faust_resumes_its_flow_and_empties_the_queue_the_next_message_starts_a_new_batch() -> None:
    """faust's stream queue is emptied by every `flow_control.resume()` (the end of each rebalance's
    recovery, with no revocation). A batch lost with it must not take more messages: they would
    never be judged or acknowledged, and faust would commit nothing past them again."""
    inbox, app = _inbox(batch_max=10)
    queue = app.FlowControlQueue(maxsize=100, clear_on_resume=True)
    handle = inbox._handler(queue)
    inbox._handler(queue)  # a second partition of the topic shares the queue
    await handle(_message(0))
    await handle(_message(1))
    app.flow_control.suspend()
    app.flow_control.resume()
    assert queue.empty()
    await handle(_message(2))
    assert [m.offset for m in queue.get_nowait()] == [2]
    assert queue.empty() and inbox._waiting == 1
