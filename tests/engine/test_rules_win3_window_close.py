"""WIN-3 with GATE-1 and BUS-6: a cluster held back in its partition's queue while its window is open
stops holding the clusters behind it when the window closes, and the live planner looks at the stage
then, as a planner restarted from its snapshot does (found by the generator, seed 9597:
tests/fuzz/found/bus6-a-reloaded-planner-requests-a-window-wake-the-live-one-requests-later.yaml)."""

from __future__ import annotations

from enginekit import CP, HOUR, MIN, T0, V31, Driver, advances, cluster, sequence, stage

from rollout_common.commands import Command, WaitChanged, WakeAt
from rollout_common.events import WakeUp
from rollout_planner.engine import decide, snapshot

# a-2 may start from 00:00 to 04:00 each day (T0 is 2026-01-01T00:00Z)
WINDOW = {"start": "2026-01-01T00:00:00Z", "duration": "4h", "recurrence": "FREQ=DAILY"}


def _held_behind_a_window() -> tuple[Driver, list[Command]]:
    """a-1 goes first (the partition's first batch, GATE-1 ungated); a-3 goes NotReady at 10m; at 1h
    a-1 is back and ready. Next in name order is a-2, in its window: its batch [a-2] would leave
    a-3 unavailable beside it, 1 >= maxUnavailable 1, so GATE-1 holds it, and a-3 waits behind it."""
    d = Driver(
        sequence(stage("a", rolloutStrategy={"maxNew": 1, "maxUnavailable": 1})),
        [cluster("a-1"), cluster("a-2", maintenanceWindow=WINDOW), cluster("a-3")],
    )
    assert advances(d.start(V31, tracks=(CP,))) == [("a", "controlPlane", V31, ["a-1"])]
    assert d.ready(["a-3"], at=10 * MIN, ready=False) == []
    held = d.finish(["a-1"], CP, at=HOUR, ready=True)
    assert advances(held) == []
    return d, held


def _lasting(commands: list[Command]) -> list[Command]:
    """Waits are announced again after a restart (not in the snapshot); every other command is a decision."""
    return [c for c in commands if not isinstance(c, WaitChanged)]


def test_win_3_a_cluster_whose_window_closes_in_the_queue_stops_holding_the_next() -> None:
    """WIN-3: at 4h a-2 can no longer start, so it gives up its turn (until its window opens again at
    24h, WIN-4) and a-3 goes alone: 0 others unavailable < maxUnavailable 1."""
    d, held = _held_behind_a_window()
    # the stage is looked at again when a-2's window closes at 4h
    assert [c for c in held if isinstance(c, WakeAt)] == [WakeAt(at=T0 + 4 * HOUR)]
    closed = d.wake(at=4 * HOUR)
    assert advances(closed) == [("a", "controlPlane", V31, ["a-3"])]
    assert [c for c in closed if isinstance(c, WakeAt)] == [WakeAt(at=T0 + 24 * HOUR)]


def test_bus_6_a_reloaded_planner_decides_as_the_live_one_once_a_window_closed() -> None:
    """BUS-6: restarted from the snapshot written at 1h, the planner looks at every stage once; at
    4h and at 5h it decides exactly as the live planner (before, the live one held a-3 until the
    next event reaching stage a while the reloaded one handed it out at once)."""
    for later in (4 * HOUR, 5 * HOUR):
        d, _ = _held_behind_a_window()
        twin = snapshot.load(snapshot.dump(d.state))
        live = d.wake(at=later)
        _, reloaded = decide(twin, WakeUp(), T0 + later)
        assert _lasting(reloaded) == _lasting(live)
        assert advances(live) == [("a", "controlPlane", V31, ["a-3"])]
        assert snapshot.dump(twin) == snapshot.dump(d.state)
