"""`python -m rollout_planner.service`: how it ends when it cannot run."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

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
