"""START, VER and SOAK rules driven through `decide`: which versions go where, and when stages change state."""

from __future__ import annotations

from enginekit import (
    CP,
    DAY,
    MIN,
    NODES,
    V30,
    V31,
    V32,
    V33,
    Driver,
    advances,
    cluster,
    notices,
    sequence,
    stage,
    transitions,
)

from rollout_common.commands import RolloutTransition, StageTransition, WakeAt
from rollout_planner.engine.views import stage_view

REL = {"1.30": V31}


def two_stages(a: list, b: list, *, soak: str = "1d", **strategy: object) -> Driver:
    return Driver(sequence(stage("a", soak=soak, rolloutStrategy=strategy), stage("b", soak=soak)), a + b)


def run_stage_a(d: Driver, names: list[str]) -> None:
    d.finish(names, CP, at=10 * MIN)
    d.finish(names, NODES, at=40 * MIN, ready=True)


def test_start_1_release_for_the_channel_starts_a_rollout_and_the_first_stage() -> None:
    d = two_stages([cluster("a-1")], [cluster("b-1")])
    out = d.release(REL)
    assert [(c.rollout_id, c.state.value) for c in out if isinstance(c, RolloutTransition)] == [("main-1", "RUNNING")]
    assert transitions(out) == [("a", "controlPlane", "IN_PROGRESS", V31), ("a", "nodes", "IN_PROGRESS", V31)]
    assert advances(out) == [("a", "controlPlane", V31, ["a-1"])]


def test_start_1_release_for_another_channel_is_ignored() -> None:
    d = two_stages([cluster("a-1")], [])
    out = d.release(REL, channel="rapid")
    assert advances(out) == [] and transitions(out) == []
    assert notices(out) == [("OTHER_CHANNEL", None)]


def test_start_4_same_release_event_twice_starts_one_rollout() -> None:
    d = two_stages([cluster("a-1")], [])
    d.release(REL, event_id="rel-7")
    out = d.release(REL, at=1 * MIN, event_id="rel-7")
    assert notices(out) == [("DUPLICATE_EVENT", None)]
    assert [c for c in out if isinstance(c, (RolloutTransition, StageTransition))] == []
    assert list(d.state.rollouts) == ["main-1"]


def test_start_2_ver_6a_on_demand_control_plane_only_targets_v_minor_and_the_one_below() -> None:
    fleet = [cluster("a-1", V30), cluster("a-2", "1.31.2-gke.1"), cluster("a-3", "1.29.8-gke.1"), cluster("a-4", V32)]
    d = Driver(sequence(stage("a", soak="0d")), fleet)
    out = d.start("1.31.14-gke.100", (CP,))
    assert advances(out) == [("a", "controlPlane", "1.31.14-gke.100", ["a-1", "a-2"])]
    assert transitions(out) == [("a", "controlPlane", "IN_PROGRESS", "1.31.14-gke.100")]
    out = d.finish(["a-1", "a-2"], CP, at=10 * MIN)
    assert advances(out) == []  # no node track in this rollout
    assert stage_view(d.state, d.state.stages[0])["tracks"]["nodes"]["state"] == "PENDING"


def test_ver_1_first_stage_takes_the_target_of_each_clusters_minor() -> None:
    d = Driver(sequence(stage("a")), [cluster("a-1"), cluster("a-2", "1.32.3-gke.1"), cluster("a-3", "1.31.1")])
    out = d.release({"1.30": V31, "1.32": V33})
    assert sorted(advances(out)) == [("a", "controlPlane", V31, ["a-1"]), ("a", "controlPlane", V33, ["a-2"])]


def test_ver_3_soak_2_stage_qualifies_the_lowest_version_after_its_soak() -> None:
    d = two_stages([cluster("a-1"), cluster("a-2", "1.32.3-gke.1")], [cluster("b-1")])
    d.release({"1.30": V31, "1.32": V33})
    out = d.finish(["a-1", "a-2"], CP, at=10 * MIN)
    soak = [c for c in out if isinstance(c, StageTransition) and c.state.value == "SOAKING"]
    assert [(c.stage, c.track.value, c.version, c.until) for c in soak] == [("a", "controlPlane", V31, d.now + DAY)]
    assert WakeAt(at=d.now + DAY) in out
    out = d.wake(at=DAY + 10 * MIN)
    assert ("a", "controlPlane", "COMPLETE", V31) in transitions(out)
    assert advances(out) == [("b", "controlPlane", V31, ["b-1"])]


def test_ver_4_downstream_cluster_newer_than_target_is_skipped_and_does_not_block() -> None:
    d = two_stages([cluster("a-1")], [cluster("b-1"), cluster("b-2", V33)], soak="0d")
    d.release(REL)
    out = d.finish(["a-1"], CP, at=10 * MIN)
    assert advances(out, CP) == [("b", "controlPlane", V31, ["b-1"])]
    out = d.finish(["b-1"], CP, at=20 * MIN)
    assert ("b", "controlPlane", "SOAKING", V31) in transitions(out)


def test_ver_5_no_eligible_downstream_cluster_makes_the_stage_stuck() -> None:
    d = two_stages([cluster("a-1")], [cluster("b-1", V32), cluster("b-2", "1.32.4-gke.100")], soak="0d")
    d.release({"1.30": V31, "1.32": V33})
    out = d.finish(["a-1"], CP, at=10 * MIN)
    assert ("b", "controlPlane", "STUCK", V31) in transitions(out)
    assert advances(out, CP) == []
    assert stage_view(d.state, d.state.stages[1])["tracks"]["controlPlane"]["reason"] == "INCOMPATIBLE_VERSION"


def test_soak_4b_stuck_stage_does_not_force_soak() -> None:
    d = two_stages([cluster("a-1")], [cluster("b-1", V32)], soak="0d")
    d.release({"1.30": V31})
    d.finish(["a-1"], CP, at=10 * MIN)
    out = d.wake(at=31 * DAY)
    assert [t for t in transitions(out) if t[:2] == ("b", "controlPlane")] == []
    assert stage_view(d.state, d.state.stages[1])["tracks"]["controlPlane"]["state"] == "STUCK"


def test_soak_1_node_upgrade_starts_only_after_control_plane_success_and_before_new_control_planes() -> None:
    d = Driver(
        sequence(stage("a", soak="0d", rolloutStrategy={"maxNew": 1, "maxUnavailable": 1})),
        [cluster("a-1"), cluster("a-2")],
    )
    assert advances(d.release(REL)) == [("a", "controlPlane", V31, ["a-1"])]
    out = d.finish(["a-1"], CP, at=10 * MIN, ready=True)
    # within the instant: a-1's nodes first; then a-2's control plane would make 2 unavailable... but
    # a-1 is handed out again (nodes), so only the node batch goes
    assert advances(out) == [("a", "nodes", V31, ["a-1"])]


def test_soak_1_within_an_instant_node_batches_go_before_control_plane_batches() -> None:
    d = Driver(sequence(stage("a", soak="0d", rolloutStrategy={"maxNew": 1})), [cluster("a-1"), cluster("a-2")])
    d.release(REL)
    out = d.finish(["a-1", "a-2"], CP, at=10 * MIN)
    assert [a[1] for a in advances(out)] == ["nodes", "nodes"]


def test_soak_4_forced_soaking_exactly_30_days_after_the_track_started() -> None:
    d = two_stages([cluster("a-1"), cluster("a-2", deprecatedApiUsage=True)], [cluster("b-1")])
    out = d.release(REL)
    assert advances(out) == [("a", "controlPlane", V31, ["a-1"])]  # VER-8: never handed out
    run_stage_a(d, ["a-1"])
    assert transitions(d.wake(at=30 * DAY - 1)) == []
    out = d.wake(at=30 * DAY)
    assert transitions(out) == [
        ("a", "nodes", "FORCED_SOAKING", V31),
        ("a", "controlPlane", "FORCED_SOAKING", V31),
    ] or transitions(out) == [("a", "controlPlane", "FORCED_SOAKING", V31), ("a", "nodes", "FORCED_SOAKING", V31)]
    out = d.wake(at=31 * DAY)
    assert advances(out) == [("b", "controlPlane", V31, ["b-1"])]


def test_soak_4b_pause_does_not_stop_the_soak() -> None:
    d = two_stages([cluster("a-1")], [cluster("b-1")])
    d.release(REL)
    d.finish(["a-1"], CP, at=10 * MIN)
    d.command("pause", at=1 * DAY)
    out = d.wake(at=DAY + 10 * MIN)
    assert ("a", "controlPlane", "COMPLETE", V31) in transitions(out)
    assert ("b", "controlPlane", "PAUSED", V31) in transitions(out)  # reaches b, which starts paused
    assert advances(out) == []


def test_soak_5_empty_first_stage_is_stuck_and_downstream_never_starts() -> None:
    d = two_stages([], [cluster("b-1")])
    out = d.release(REL)
    assert transitions(out) == [("a", "controlPlane", "STUCK", V31), ("a", "nodes", "STUCK", V31)]
    assert advances(out) == []
    assert stage_view(d.state, d.state.stages[0])["tracks"]["nodes"]["reason"] == "EMPTY_FIRST_STAGE"


def test_soak_5_empty_middle_stage_passes_the_version_through_at_once() -> None:
    d = Driver(sequence(stage("a", soak="0d"), stage("m"), stage("c")), [cluster("a-1"), cluster("c-1")])
    d.release(REL)
    out = d.finish(["a-1"], CP, at=10 * MIN)
    assert transitions(out)[:3] == [
        ("a", "controlPlane", "SOAKING", V31),
        ("a", "controlPlane", "COMPLETE", V31),
        ("m", "controlPlane", "COMPLETE", V31),
    ]
    assert advances(out, CP) == [("c", "controlPlane", V31, ["c-1"])]


def test_soak_4c_older_rollout_overtaken_at_a_stage_is_cancelled_superseded() -> None:
    hold = [{"start": "2026-01-01T00:00:00Z", "end": "2026-01-06T00:00:00Z", "scope": "NO_UPGRADES"}]
    d = two_stages([cluster("a-1", exclusions=hold)], [cluster("b-1")])
    assert advances(d.release(REL)) == []
    out = d.release({"1.30": "1.31.20-gke.5"}, at=DAY, event_id="rel-2")
    assert [
        (c.rollout_id, c.stage, c.track.value, c.state.value)
        for c in out
        if isinstance(c, StageTransition) and c.state.value == "CANCELLED"
    ] == [("main-1", "a", "controlPlane", "CANCELLED"), ("main-1", "a", "nodes", "CANCELLED")] or sorted(
        (c.rollout_id, c.track.value) for c in out if isinstance(c, StageTransition) and c.state.value == "CANCELLED"
    ) == [("main-1", "controlPlane"), ("main-1", "nodes")]
    assert advances(d.wake(at=5 * DAY)) == [("a", "controlPlane", "1.31.20-gke.5", ["a-1"])]


def test_start_3_upstream_starts_a_newer_release_while_downstream_receives_the_older() -> None:
    d = Driver(
        sequence(stage("a", soak="0d"), stage("b", soak="1d", rolloutStrategy={"maxNew": 1, "maxUnavailable": 0})),
        [cluster("a-1"), cluster("b-1"), cluster("b-2")],
    )
    d.release(REL)
    out = d.finish(["a-1"], CP, at=10 * MIN)
    assert advances(out, CP) == [("b", "controlPlane", V31, ["b-1"])]
    d.finish(["a-1"], NODES, at=40 * MIN, ready=True)
    out = d.release({"1.31": "1.31.20-gke.5"}, at=45 * MIN, event_id="rel-2")
    assert advances(out) == [("a", "controlPlane", "1.31.20-gke.5", ["a-1"])]
    b = stage_view(d.state, d.state.stages[1])["tracks"]["controlPlane"]
    assert (b["state"], b["rollout"], b["version"]) == ("IN_PROGRESS", "main-1", V31)
