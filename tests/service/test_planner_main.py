"""`python -m rollout_planner.service`: how it ends when it cannot run."""

from __future__ import annotations

import asyncio
import logging
from typing import cast

import pytest

from rollout_common.errors import PermanentError, TransientError
from rollout_planner.service import __main__ as planner_main
from rollout_planner.service import runtime
from rollout_planner.service.checkpoint import IncompatibleSnapshotError
from rollout_planner.service.planner import Planner


def test_the_planner_exits_2_on_an_incompatible_snapshot(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def refuses(_: object) -> None:
        raise IncompatibleSnapshotError("the stored snapshot (rollout:planner/snapshot) cannot be loaded: format 99")

    monkeypatch.setattr(planner_main, "serve", refuses)
    assert planner_main.main([]) == 2
    err = capsys.readouterr().err
    assert err == "error: the stored snapshot (rollout:planner/snapshot) cannot be loaded: format 99\n"


class _Deaf:
    """A planner that does not stop when asked (stuck in a call to a server that is gone)."""

    def __init__(self) -> None:
        self.asked = False

    def stop(self) -> None:
        self.asked = True


async def test_a_planner_cancelled_after_the_grace_period_is_a_clean_stop() -> None:
    """Issue 12, clean restarts: SIGTERM, then the grace period runs out and the planner is
    cancelled, which is safe (atomic writes, outbox); serving must return, not raise the
    CancelledError out of the process (it exited 1 with a traceback)."""
    task = asyncio.create_task(asyncio.Event().wait())  # never ends by itself
    signalled = asyncio.Event()
    signalled.set()
    deaf = _Deaf()
    await runtime._until_done_or_stopped(task, signalled, planner=cast(Planner, deaf), grace_s=0.05)
    assert deaf.asked
    assert task.cancelled()


class _GivesUpWhenStopped:
    """A planner retrying a write against a store that is gone; asked to stop, it gives the write
    up with its transient error (as `Planner._retrying` does once stopping)."""

    def __init__(self) -> None:
        self.stopping = asyncio.Event()

    def stop(self) -> None:
        self.stopping.set()

    async def run(self) -> None:
        await self.stopping.wait()
        raise TransientError("redis: connection refused")


async def test_a_write_given_up_while_stopping_is_a_clean_stop(caplog: pytest.LogCaptureFixture) -> None:
    """Issue 12, shutdown bounds: SIGTERM with Redis gone; the planner's late status write
    raises the transient error instead of retrying; serving returns (the process exits 0) and
    says what was left, instead of a traceback and exit 1."""
    planner = _GivesUpWhenStopped()
    task = asyncio.create_task(planner.run())
    signalled = asyncio.Event()
    signalled.set()
    with caplog.at_level(logging.WARNING, logger="rollout.planner"):
        await runtime._until_done_or_stopped(task, signalled, planner=cast(Planner, planner), grace_s=5.0)
    assert [r.getMessage() for r in caplog.records] == ["stopped with a write not done; it is redone after a restart"]
    assert caplog.records[0].error == "redis: connection refused"


async def _fails(error: Exception) -> None:
    raise error


@pytest.mark.parametrize("error", [TransientError("redis: connection refused"), PermanentError("bad settings")])
async def test_failures_before_a_stop_request_still_end_serving_with_their_error(error: Exception) -> None:
    """Without SIGTERM, a planner that ends on an error is not a clean stop, transient or not."""
    task = asyncio.create_task(_fails(error))
    with pytest.raises(type(error)):
        await runtime._until_done_or_stopped(task, asyncio.Event(), planner=cast(Planner, _Deaf()), grace_s=1.0)
