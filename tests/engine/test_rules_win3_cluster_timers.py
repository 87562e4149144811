"""WIN-3: a cluster held in its partition's queue while its window is open asks for one wake at the
window's close, however often its stage is looked at meanwhile; whether that wake is already pending
is answered by the keyed cluster timers, without looking through the pending timers, so it costs the
same with ten timers pending as with a million. The keys stay the pending timers through the timers'
firing and a snapshot's load (BUS-6)."""

from __future__ import annotations

from collections.abc import Iterator

from enginekit import HOUR, T0, V31, advances, cluster
from test_rules_win3_window_close import _held_behind_a_window

from rollout_planner.engine import snapshot
from rollout_planner.engine.audit import audit
from rollout_planner.engine.model import CP, Timer

HELD_UNTIL = (T0 + 4 * HOUR, "a-2", CP)  # a-2's window closes at 4h
OPENS_AGAIN = (T0 + 24 * HOUR, "a-2", CP)


class _Unscanned(list[Timer]):
    """The pending timers as a heap that may not be looked through: heapq's pushes and pops and a
    look at the earliest timer work as before, a scan fails the test."""

    def __iter__(self) -> Iterator[Timer]:
        raise AssertionError("the pending timers were looked through")


def test_win_3_a_held_cluster_asks_once_for_its_wake_however_often_its_stage_is_looked_at() -> None:
    d, _ = _held_behind_a_window()
    assert d.state.cluster_timers == {HELD_UNTIL: 1}
    # a-4 and a-5 joining make the stage looked at again at 2h and 3h: a-2 is held each time
    assert advances(d.upsert(cluster("a-4"), at=2 * HOUR)) == []
    assert advances(d.upsert(cluster("a-5"), at=3 * HOUR)) == []
    assert [(t.at, t.ref, t.track) for t in d.state.timers if t.kind == "cluster"] == [HELD_UNTIL]
    assert d.state.cluster_timers == {HELD_UNTIL: 1}
    # fired at 4h: a-2 gives up its turn until its window opens again (WIN-4), and a-3 goes
    assert advances(d.wake(at=4 * HOUR)) == [("a", "controlPlane", V31, ["a-3"])]
    assert d.state.cluster_timers == {OPENS_AGAIN: 1}
    assert audit(d.state) == []


def test_win_3_whether_the_wake_is_pending_does_not_look_through_the_timers() -> None:
    """Before the keyed timers, every look at a held cluster scanned every pending timer."""
    d, _ = _held_behind_a_window()
    d.state.timers = _Unscanned(d.state.timers)
    assert advances(d.upsert(cluster("a-4"), at=2 * HOUR)) == []
    assert d.state.cluster_timers == {HELD_UNTIL: 1}
    assert advances(d.wake(at=4 * HOUR)) == [("a", "controlPlane", V31, ["a-3"])]
    assert d.state.cluster_timers == {OPENS_AGAIN: 1}


def test_bus_6_a_snapshot_loads_the_keyed_cluster_timers_with_the_timers() -> None:
    d, _ = _held_behind_a_window()
    twin = snapshot.load(snapshot.dump(d.state))
    assert twin.cluster_timers == {HELD_UNTIL: 1}
    assert audit(twin) == []
