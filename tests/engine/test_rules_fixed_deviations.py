"""Rules the engine once broke, found by these tests; kept as regressions (each names its rule)."""

from __future__ import annotations

from enginekit import CP, DAY, MIN, NODES, V31, V32, Driver, advances, cluster, sequence, stage, transitions

REL = {"1.30": V31}
HOLD_20D = [{"start": "2026-01-01T00:00:00Z", "end": "2026-01-21T00:00:00Z", "scope": "NO_UPGRADES"}]


def test_gate_1_soak_1_node_upgrade_starts_when_control_plane_succeeds_under_max_unavailable_0() -> None:
    d = Driver(
        sequence(stage("a", soak="0d", rolloutStrategy={"maxNew": 1, "maxUnavailable": 0})),
        [cluster("a-1"), cluster("a-2")],
    )
    d.release(REL)
    d.finish(["a-1"], CP, at=10 * MIN)
    d.finish(["a-1"], NODES, at=40 * MIN)
    assert advances(d.ready(["a-1"], at=41 * MIN)) == [("a", "controlPlane", V31, ["a-2"])]
    # a-1 is ready, a-2 is the batch itself: the other clusters' unavailable count is 0
    assert advances(d.finish(["a-2"], CP, at=51 * MIN)) == [("a", "nodes", V31, ["a-2"])]


def test_soak_1_downstream_node_track_waits_for_control_plane_instead_of_cancelling() -> None:
    d = Driver(
        sequence(stage("a", soak="1d", rolloutStrategy={"maxUnavailable": 0}), stage("b", soak="1d")),
        [cluster("a-1"), cluster("b-1")],
    )
    d.release(REL)
    d.finish(["a-1"], CP, at=10 * MIN)
    d.finish(["a-1"], NODES, at=40 * MIN)
    d.ready(["a-1"], at=41 * MIN)  # both tracks of a soak now and qualify in the same instant
    out = d.wake(at=DAY + 41 * MIN)
    assert ("b", "nodes", "CANCELLED", V31) not in transitions(out)
    assert advances(out) == [("b", "controlPlane", V31, ["b-1"])]
    assert advances(d.finish(["b-1"], CP, at=DAY + 51 * MIN)) == [("b", "nodes", V31, ["b-1"])]


def test_ver_6_held_downstream_cluster_reaches_newest_qualified_on_both_tracks() -> None:
    d = Driver(
        sequence(stage("a", soak="1d"), stage("b", soak="1d")), [cluster("a-1"), cluster("b-1", exclusions=HOLD_20D)]
    )
    d.release(REL)
    d.finish(["a-1"], CP, at=10 * MIN)
    d.finish(["a-1"], NODES, at=40 * MIN, ready=True)
    d.wake(at=DAY + 10 * MIN)
    d.wake(at=DAY + 40 * MIN)
    d.release({"1.31": V32}, at=2 * DAY, event_id="rel-2")
    d.finish(["a-1"], CP, at=2 * DAY + 10 * MIN)
    d.finish(["a-1"], NODES, at=2 * DAY + 40 * MIN, ready=True)
    d.wake(at=3 * DAY + 10 * MIN)
    d.wake(at=3 * DAY + 40 * MIN)
    assert advances(d.wake(at=20 * DAY)) == [("b", "controlPlane", V31, ["b-1"])]  # one minor at a time
    out = d.finish(["b-1"], CP, at=20 * DAY + 10 * MIN)
    later = advances(out)
    for _ in range(4):
        if any(a[1] == "controlPlane" and a[2] == V32 for a in later):
            break
        for name, track in list(d.running):
            later += advances(d.finish([name], track, at=d.now - 0 + 30 * MIN, ready=True))
    assert ("b", "controlPlane", V32, ["b-1"]) in later
    for name, track in list(d.running):
        d.finish([name], track, at=d.now + 30 * MIN, ready=True)
    for name, track in list(d.running):
        d.finish([name], track, at=d.now + 30 * MIN, ready=True)
    rec = d.state.clusters["b-1"]
    assert (rec.versions[0].text, rec.versions[1].text) == (V32, V32)
