"""How faust's consumer hands a record to its streams (BUS-4: a record is never lost or handled twice
by the hand-over): in place when the callback finishes without waiting, through faust's own
`wait_first` when it waits, where a suspended flow still interrupts it."""

from __future__ import annotations

import asyncio

from mode import Service
from mode.utils.locks import Event

from rollout_adapters.faust_message_dispatch import _wait_first


class _Delivered:
    def __init__(self) -> None:
        self.records: list[str] = []
        self.room = asyncio.Event()

    async def at_once(self, record: str) -> str:
        self.records.append(record)
        return f"queued {record}"

    async def when_room(self, record: str) -> str:
        await self.room.wait()
        self.records.append(record)
        return f"queued {record}"


async def _tasks_now() -> int:
    return len(asyncio.all_tasks())


async def test_a_callback_that_does_not_wait_runs_in_place_and_makes_no_task() -> None:
    service, delivered, flow = Service(), _Delivered(), Event()
    before = await _tasks_now()
    task_counts: list[int] = []

    async def counted(record: str) -> str:
        task_counts.append(len(asyncio.all_tasks()))
        return await delivered.at_once(record)

    first, other = counted("hb-1"), flow.wait()
    answer = await _wait_first(service, first, other)

    assert (answer.done, answer.results, answer.stopped) == ([first], ["queued hb-1"], False)
    assert delivered.records == ["hb-1"]
    assert task_counts == [before]  # faust's own made four tasks here
    assert other.cr_frame is None  # closed unstarted: no "never awaited" warning (warnings are errors)


async def test_a_callback_that_waits_goes_on_from_where_it_stopped() -> None:
    service, delivered, flow = Service(), _Delivered(), Event()
    first = delivered.when_room("hb-2")
    waiting = asyncio.ensure_future(_wait_first(service, first, flow.wait()))
    await asyncio.sleep(0)
    assert not waiting.done() and delivered.records == []
    delivered.room.set()

    answer = await asyncio.wait_for(waiting, timeout=10)

    assert (answer.done, answer.results, answer.stopped) == ([answer.done[0]], ["queued hb-2"], False)
    assert delivered.records == ["hb-2"]  # once, not again from the start


async def test_a_suspended_flow_still_interrupts_a_waiting_callback() -> None:
    service, delivered, flow = Service(), _Delivered(), Event()
    suspended = flow.wait()
    waiting = asyncio.ensure_future(_wait_first(service, delivered.when_room("hb-3"), suspended))
    await asyncio.sleep(0)
    flow.set()

    answer = await asyncio.wait_for(waiting, timeout=10)

    assert (answer.done, answer.results) == ([suspended], [True])
    delivered.room.set()
    await asyncio.sleep(0)
    assert delivered.records == []  # the callback was cancelled: faust reads the record again after the rebalance


async def test_a_callback_that_raises_raises_as_from_its_task() -> None:
    service, flow = Service(), Event()

    async def broken(record: str) -> str:
        raise ValueError(f"bad {record}")

    other = flow.wait()
    try:
        await _wait_first(service, broken("hb-4"), other)
    except ValueError as exc:
        assert str(exc) == "bad hb-4"
    else:
        raise AssertionError("the callback's error was swallowed")
    assert other.cr_frame is None
