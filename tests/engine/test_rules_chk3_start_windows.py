"""CHK-3 start windows: a track of a stage goes IN_PROGRESS for a version only inside the stage's
start window (and after any `before` approval); until then it stays PENDING and says when it opens."""

from __future__ import annotations

from enginekit import CP, DAY, HOUR, MIN, NODES, V31, Driver, acks, advances, cluster, sequence, stage, transitions

from rollout_common.commands import StageTransition

TEST = ["test-1"]
PROD = ["prod-1", "prod-2"]
# enginekit's clock starts on Thursday 2026-01-01; the window opens on Fridays 09:00-17:00 UTC
FRIDAYS = {"start": "2026-01-02T09:00:00Z", "duration": "8h", "recurrence": "FREQ=WEEKLY;BYDAY=FR"}
OPENS = DAY + 9 * HOUR


def _driver(**prod: object) -> Driver:
    seq = sequence(stage("test", soak="0d"), stage("prod", soak="1d", **prod))
    return Driver(seq, [cluster(n) for n in TEST + PROD])


def _reasons(commands: list) -> list[tuple[str, str, str]]:
    return [
        (c.track.value, c.state.value, c.reason)
        for c in commands
        if isinstance(c, StageTransition) and c.stage == "prod"
    ]


def test_chk_3_track_stays_pending_until_the_window_opens_then_starts() -> None:
    d = _driver(startWindow=FRIDAYS)
    d.release({"1.30": V31})
    out = d.finish(TEST, CP, at=10 * MIN, ready=True)
    assert _reasons(out) == [
        (
            "controlPlane",
            "PENDING",
            "the version reached the stage; it starts when the stage's start window opens: "
            "the window opens at 2026-01-02T09:00:00+00:00 (CHK-3)",
        )
    ]
    assert [a for a in advances(out) if a[0] == "prod"] == []
    out = d.finish(TEST, NODES, at=40 * MIN, ready=True)
    assert [t for t in transitions(out) if t[0] == "prod"] == [("prod", "nodes", "PENDING", V31)]
    out = d.wake(at=OPENS)
    assert transitions(out) == [("prod", "controlPlane", "IN_PROGRESS", V31), ("prod", "nodes", "IN_PROGRESS", V31)]
    assert advances(out) == [("prod", "controlPlane", V31, PROD)]
    assert d.state.stage_by_name["prod"].runs[0]["main-1"].started_at == d.now  # SOAK-4's clock from here


def test_chk_3_a_started_stage_goes_on_outside_the_window() -> None:
    d = _driver(startWindow=FRIDAYS)
    d.release({"1.30": V31})
    d.finish(TEST, CP, at=10 * MIN, ready=True)
    d.finish(TEST, NODES, at=40 * MIN, ready=True)
    d.wake(at=OPENS)
    # the control planes finish after the window closed (17:00); the nodes batch goes out anyway
    out = d.finish(PROD, CP, at=DAY + 18 * HOUR, ready=True)
    assert advances(out) == [("prod", "nodes", V31, PROD)]


def test_chk_3_window_inside_a_before_approval_starts_at_once_when_approved_inside_it() -> None:
    """After the approval a track still waits for the window; an approval inside it starts at once."""
    d = _driver(startWindow=FRIDAYS, approval={"before": True})
    d.release({"1.30": V31})
    d.finish(TEST, CP, at=10 * MIN, ready=True)
    out = d.command("approve", at=20 * MIN, command_id="a", stage="prod", gate="before", issued_by="alice")
    assert acks(out)[0][1] is True
    assert [(t, s) for t, s, _ in _reasons(out)] == [("controlPlane", "PENDING")]
    out = d.wake(at=OPENS)
    assert transitions(out) == [("prod", "controlPlane", "IN_PROGRESS", V31)]
    out = d.finish(TEST, NODES, at=OPENS + HOUR, ready=True)
    assert [t for t in transitions(out) if t[0] == "prod"] == [("prod", "nodes", "IN_PROGRESS", V31)]


def test_chk_3_cancel_while_waiting_for_the_window_starts_nothing_when_it_opens() -> None:
    d = _driver(startWindow=FRIDAYS)
    d.release({"1.30": V31})
    d.finish(TEST, CP, at=10 * MIN, ready=True)
    d.command("cancel", at=HOUR, command_id="c")
    out = d.wake(at=OPENS)
    assert transitions(out) == [] and advances(out) == []
