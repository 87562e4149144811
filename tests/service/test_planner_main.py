"""`python -m rollout_planner.service`: how it ends when it cannot run."""

from __future__ import annotations

import pytest

from rollout_planner.service import __main__ as planner_main
from rollout_planner.service.checkpoint import IncompatibleSnapshotError


def test_the_planner_exits_2_on_an_incompatible_snapshot(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def refuses(_: object) -> None:
        raise IncompatibleSnapshotError("the stored snapshot (rollout:planner/snapshot) cannot be loaded: format 99")

    monkeypatch.setattr(planner_main, "serve", refuses)
    assert planner_main.main([]) == 2
    err = capsys.readouterr().err
    assert err == "error: the stored snapshot (rollout:planner/snapshot) cannot be loaded: format 99\n"
