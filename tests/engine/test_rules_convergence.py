"""The fleet converges under release, inventory and sequence changes: SOAK-4b, SOAK-4c, SEQ-2, SEQ-6a,
SEQ-7, VER-5, OPS-1 and GATE-1 through `decide`, with the audit after every decision."""

from __future__ import annotations

from enginekit import (
    CP,
    DAY,
    HOUR,
    MIN,
    NODES,
    T0,
    V30,
    V31,
    V32,
    Driver,
    acks,
    advances,
    cluster,
    sequence,
    stage,
    transitions,
)

from rollout_common.commands import Command, RolloutTransition, StageTransition
from rollout_common.events import Event, SequenceChange
from rollout_common.status import ClusterStatus
from rollout_planner.engine.audit import audit
from rollout_planner.engine.views import cluster_status, stage_track_state, stage_view

V29 = "1.29.9-gke.100"
V31_20 = "1.31.20-gke.500"
V32_3 = "1.32.3-gke.100"
V32_5 = "1.32.5-gke.200"
INCOMPATIBLE = "no cluster of the stage is eligible for any qualified version"
V29_16 = "1.29.16-gke.8000"
V29_18 = "1.29.18-gke.7000"


class Audited(Driver):
    def send(self, *events: Event, at: float | None = None) -> list[Command]:
        out = super().send(*events, at=at)
        assert audit(self.state) == []
        return out


def reasons(commands: list[Command]) -> list[tuple[str, str, str, str | None, str]]:
    """(stage, track, state, version, reason) of every StageTransition, in order."""
    return [
        (c.stage, c.track.value, c.state.value, c.version, c.reason) for c in commands if isinstance(c, StageTransition)
    ]


def rollout_ends(commands: list[Command]) -> list[tuple[str, str, str]]:
    return [
        (c.rollout_id, c.state.value, c.reason)
        for c in commands
        if isinstance(c, RolloutTransition) and c.state.value != "RUNNING"
    ]


# SOAK-4c


def test_soak_4c_a_run_that_upgrades_its_other_clusters_itself_soaks_though_it_lost_one_to_a_newer_rollout() -> None:
    """main-1's nodes run loses a-1 to main-2 (a newer 1.29 target), then upgrades a-2 itself: nothing
    was left for it to lose at the end, so it soaks and qualifies, never CANCELLED SUPERSEDED."""
    d = Audited(sequence(stage("a", soak="1d"), stage("b", soak="1d")), [cluster("a-1", V29), cluster("a-2")])
    d.release({"1.29": V29_16, "1.30": V31})
    d.release({"1.29": V29_18}, at=5 * MIN, event_id="rel-2")
    out = d.finish(["a-1", "a-2"], CP, at=10 * MIN, ready=True)
    assert advances(out) == [
        ("a", "nodes", V31, ["a-2"]),
        ("a", "controlPlane", V29_18, ["a-1"]),
    ]
    assert d.state.clusters["a-1"].target_run[1] == "main-2"
    out = d.finish(["a-2"], NODES, at=40 * MIN, ready=True)
    assert reasons(out) == [("a", "nodes", "SOAKING", V31, "all eligible clusters upgraded")]
    out = d.wake(at=40 * MIN + 1440 * MIN)
    # b has no clusters: the qualified version passes through it (SOAK-5)
    assert transitions(out)[-2:] == [("a", "nodes", "COMPLETE", V31), ("b", "nodes", "COMPLETE", V31)]


# SEQ-7


def test_seq_7_an_accepted_sequence_change_keeps_a_failed_cluster_not_done_until_the_forced_soak() -> None:
    """GATE-2 counts a failed cluster as not done until the forced soak; a sequence change, even one
    that changes nothing, keeps its failed target, so the track neither soaks nor qualifies early."""
    seq = sequence(stage("a", soak="1d", rolloutStrategy={"maxNew": 2}), stage("b", soak="1d"))
    d = Audited(seq, [cluster("a-1"), cluster("a-2"), cluster("b-1")])
    d.release({"1.30": V31})
    d.send(d.result("a-1", CP, "failed"), d.result("a-2", CP), at=10 * MIN)
    out = d.send(SequenceChange(command_id="s1", sequence=seq), at=20 * MIN)
    assert acks(out) == [("s1", True, "sequence change applied")]
    assert transitions(out) == []
    a = d.state.stages[0]
    assert (a.runs[0]["main-1"].state.value, a.runs[0]["main-1"].remaining) == ("IN_PROGRESS", 1)
    assert stage_view(d.state, a)["tracks"]["controlPlane"]["counts"] == {"FAILED": 1, "NOT_READY": 1}
    out = d.wake(at=30 * DAY)
    assert reasons(out)[:1] == [
        (
            "a",
            "controlPlane",
            "FORCED_SOAKING",
            V31,
            "not finished within the 30-day maximum upgrade time; soaking anyway",
        )
    ]


# VER-5, SOAK-4b


def _skipping_minor(a_version: str) -> Audited:
    """Stage a on `a_version`; b-1's control plane on 1.32.5, its nodes on 1.30."""
    return Audited(
        sequence(stage("a", soak="1d"), stage("b", soak="1d")),
        [cluster("a-1", a_version), cluster("a-2", a_version), cluster("b-1", V32_5, nodeVersion=V30)],
    )


def test_ver_5_a_release_that_skips_a_minor_sticks_both_tracks_of_the_stage() -> None:
    """1.30 -> 1.32.3 is two minors: no control plane of stage a may take it, so no node may either
    (never above its control plane). Both tracks are STUCK, never force-soaked, and b gets nothing."""
    d = _skipping_minor(V30)
    out = d.release({"1.30": V32_3})
    assert reasons(out) == [
        ("a", "controlPlane", "STUCK", V32_3, f"{INCOMPATIBLE}: offered {V32_3}, members on {V30}"),
        ("a", "nodes", "STUCK", V32_3, f"{INCOMPATIBLE}: offered {V32_3}, members on {V30} (control planes on {V30})"),
    ]
    assert advances(out) == []
    assert rollout_ends(out) == []  # STUCK, still active (SOAK-4b, OPS-1)
    out = d.wake(at=31 * DAY)
    assert transitions(out) == [] and advances(out) == []
    assert d.state.clusters["b-1"].versions[1].text == V30


def test_ver_5_a_release_for_another_minor_sticks_both_tracks_too() -> None:
    d = _skipping_minor(V29)
    out = d.release({"1.30": V32_3})
    assert [(s, t, state) for s, t, state, _, _ in reasons(out)] == [
        ("a", "controlPlane", "STUCK"),
        ("a", "nodes", "STUCK"),
    ]
    assert advances(d.wake(at=31 * DAY)) == []


def test_ver_5_an_on_demand_nodes_only_rollout_above_every_control_plane_is_stuck() -> None:
    """Nodes only: the rollout upgrades no control plane, so nodes above theirs can never go."""
    d = Audited(sequence(stage("a", soak="1d")), [cluster("a-1"), cluster("a-2")])
    out = d.start(V31, (NODES,))
    assert reasons(out) == [
        ("a", "nodes", "STUCK", V31, f"{INCOMPATIBLE}: offered {V31}, members on {V30} (control planes on {V30})")
    ]
    assert advances(d.wake(at=31 * DAY)) == []


def test_seq_7_a_stage_appended_behind_a_completed_track_gets_the_version_it_qualified_at_once() -> None:
    """b's control plane has qualified 1.31.13 (its nodes still run) when c is appended: c's control
    plane starts with that version at the same decision, and its nodes follow when b's qualify."""
    ab = [stage("a", soak="0d"), stage("b", soak="1d")]
    d = Audited(sequence(*ab), [cluster("a-1"), cluster("b-1"), cluster("c-1")])
    d.release({"1.30": V31})
    d.finish(["a-1"], CP, at=10 * MIN, ready=True)
    d.finish(["a-1"], NODES, at=40 * MIN, ready=True)
    d.finish(["b-1"], CP, at=50 * MIN, ready=True)
    out = d.wake(at=50 * MIN + DAY)
    assert ("b", "controlPlane", "COMPLETE", V31) in transitions(out)
    out = d.send(SequenceChange(command_id="s1", sequence=sequence(*ab, stage("c", soak="0d"))), at=2 * DAY)
    assert acks(out) == [("s1", True, "sequence change applied")]
    assert reasons(out) == [("c", "controlPlane", "IN_PROGRESS", V31, "the version reached the stage")]
    assert advances(out) == [("c", "controlPlane", V31, ["c-1"])]
    d.finish(["b-1"], NODES, at=2 * DAY + 10 * MIN, ready=True)
    out = d.wake(at=3 * DAY + 10 * MIN)
    assert transitions(out) == [("b", "nodes", "COMPLETE", V31), ("c", "nodes", "IN_PROGRESS", V31)]


def test_soak_4b_a_stuck_first_stage_is_evaluated_again_when_an_eligible_cluster_joins() -> None:
    """No cluster of a is eligible at the release: both tracks STUCK, the rollout stays active. a-2
    joins on 1.30 a day later: the stage starts and upgrades it, and the rollout goes on to b."""
    d = Audited(sequence(stage("a", soak="0d"), stage("b", soak="0d")), [cluster("a-1", V29), cluster("b-1")])
    out = d.release({"1.30": V31})
    assert [(s, t, state) for s, t, state, _, _ in reasons(out)] == [
        ("a", "controlPlane", "STUCK"),
        ("a", "nodes", "STUCK"),
    ]
    assert rollout_ends(out) == []
    out = d.upsert(cluster("a-2"), at=DAY)
    assert reasons(out) == [
        ("a", "controlPlane", "IN_PROGRESS", V31, "the version reached the stage"),
        ("a", "nodes", "IN_PROGRESS", V31, "the version reached the stage"),
    ]
    assert advances(out) == [("a", "controlPlane", V31, ["a-2"])]
    d.finish(["a-2"], CP, at=DAY + 10 * MIN, ready=True)
    out = d.finish(["a-2"], NODES, at=DAY + 40 * MIN, ready=True)
    assert ("b", "nodes", "IN_PROGRESS", V31) in transitions(out)


def test_soak_4b_an_empty_first_stage_starts_when_a_cluster_joins_it() -> None:
    d = Audited(sequence(stage("a", soak="0d"), stage("b", soak="0d")), [cluster("b-1")])
    out = d.release({"1.30": V31})
    assert [(s, t, state, why) for s, t, state, _, why in reasons(out)] == [
        ("a", "controlPlane", "STUCK", "the first stage has no clusters, so nothing can be qualified downstream"),
        ("a", "nodes", "STUCK", "the first stage has no clusters, so nothing can be qualified downstream"),
    ]
    out = d.upsert(cluster("a-1"), at=DAY)
    assert [(s, t, state) for s, t, state, _, _ in reasons(out)] == [
        ("a", "controlPlane", "IN_PROGRESS"),
        ("a", "nodes", "IN_PROGRESS"),
    ]
    assert advances(out) == [("a", "controlPlane", V31, ["a-1"])]


# SEQ-6a


def test_seq_6a_a_cluster_joining_a_completed_stage_is_upgraded_as_a_late_member() -> None:
    """a's run completed and qualified 1.31.13; a-2 joins a then: main-1 upgrades it (both tracks,
    under a's strategy) while a stays COMPLETE and its qualified version does not change."""
    d = Audited(sequence(stage("a", soak="0d"), stage("b", soak="1d")), [cluster("a-1"), cluster("b-1")])
    d.release({"1.30": V31})
    d.finish(["a-1"], CP, at=10 * MIN, ready=True)
    out = d.finish(["a-1"], NODES, at=40 * MIN, ready=True)
    assert ("a", "nodes", "COMPLETE", V31) in transitions(out)
    out = d.upsert(cluster("a-2"), at=DAY)
    assert transitions(out) == []
    assert advances(out) == [("a", "controlPlane", V31, ["a-2"])]
    out = d.finish(["a-2"], CP, at=DAY + 10 * MIN, ready=True)
    assert transitions(out) == [] and advances(out) == [("a", "nodes", V31, ["a-2"])]
    d.finish(["a-2"], NODES, at=DAY + 40 * MIN, ready=True)
    a = d.state.stages[0]
    assert [(r.state.value, r.qualified) for t in (0, 1) for r in a.runs[t].values()] == [
        ("COMPLETE", d.state.clusters["a-1"].versions[0]),
        ("COMPLETE", d.state.clusters["a-1"].versions[1]),
    ]
    assert stage_view(d.state, a)["tracks"]["nodes"]["counts"] == {"COMPLETE": 2}


def test_ops_1_seq_6a_a_member_that_joined_a_soaking_stage_during_a_pause_is_handed_out_at_resume() -> None:
    """a soaks 1d after a-1; the rollout is paused, a-2 joins a (held: nothing is handed out while
    paused), and the resume hands a-2 out at once though a was never PAUSED itself (it soaked on).
    Before, only the stages the resume un-paused were looked at again, so a completed without a-2
    (fuzz seed 11472)."""
    d = Audited(sequence(stage("a", soak="1d"), stage("b", soak="0d")), [cluster("a-1"), cluster("b-1")])
    d.release({"1.30": V31})
    d.finish(["a-1"], CP, at=10 * MIN, ready=True)
    d.finish(["a-1"], NODES, at=40 * MIN, ready=True)
    d.command("pause", at=HOUR, command_id="c1", rollout_id="main-1")
    assert advances(d.upsert(cluster("a-2"), at=3 * HOUR)) == []
    out = d.command("resume", at=5 * HOUR, command_id="c2", rollout_id="main-1")
    assert acks(out) == [("c2", True, "resume applied")]
    assert advances(out) == [("a", "controlPlane", V31, ["a-2"])]
    assert [stage_track_state(d.state.stages[0], t) for t in (0, 1)] == ["SOAKING", "SOAKING"]


def test_soak_4c_a_newer_rollout_takes_over_a_cluster_that_failed_in_an_older_one() -> None:
    """a-1's upgrade to 1.31.13 failed in main-1; main-2 offers 1.31.20: a-1 goes out again at once,
    a new attempt at the newer target, and main-1, with nothing left there, is overtaken."""
    d = Audited(sequence(stage("a", soak="1d")), [cluster("a-1"), cluster("a-2")])
    d.release({"1.30": V31})
    d.send(d.result("a-1", CP, "failed"), d.result("a-2", CP), at=10 * MIN)
    out = d.release({"1.30": V31_20, "1.31": V31_20}, at=HOUR, event_id="rel-2")
    assert reasons(out) == [
        ("a", "controlPlane", "IN_PROGRESS", V31_20, "the version reached the stage"),
        ("a", "nodes", "IN_PROGRESS", V31_20, "the version reached the stage"),
        ("a", "controlPlane", "CANCELLED", V31, "every cluster it still had to upgrade now goes to a newer version"),
    ]
    assert advances(out) == [("a", "controlPlane", V31_20, ["a-1"])]  # a-2's nodes still upgrade
    assert d.state.clusters["a-1"].failed == (None, None)


# OPS-1


def test_ops_1_cancel_marks_every_stage_and_track_not_complete_cancelled_the_unreached_ones_too() -> None:
    d = Audited(
        sequence(stage("a", soak="0d"), stage("b", soak="1d"), stage("c", soak="1d")),
        [cluster("a-1"), cluster("b-1"), cluster("c-1")],
    )
    d.release({"1.30": V31})
    d.finish(["a-1"], CP, at=10 * MIN, ready=True)  # a's control plane completes, b's starts
    out = d.command("cancel", at=HOUR, command_id="c1", rollout_id="main-1")
    assert acks(out) == [("c1", True, "cancel applied")]
    assert [(s, t, state) for s, t, state, _, _ in reasons(out)] == [
        ("a", "nodes", "CANCELLED"),
        ("b", "controlPlane", "CANCELLED"),
        ("b", "nodes", "CANCELLED"),
        ("c", "controlPlane", "CANCELLED"),
        ("c", "nodes", "CANCELLED"),
    ]
    assert {s.spec.name: [stage_track_state(s, t) for t in (0, 1)] for s in d.state.stages} == {
        "a": ["COMPLETE", "CANCELLED"],
        "b": ["CANCELLED", "CANCELLED"],
        "c": ["CANCELLED", "CANCELLED"],
    }
    assert cluster_status(d.state, d.state.clusters["c-1"]) == (
        ClusterStatus.PENDING,
        "rollout main-1 was cancelled before its version reached this stage (OPS-1)",
    )


def test_ops_1_a_rollout_stuck_at_an_empty_first_stage_is_active_paused_resumed_and_cancelled() -> None:
    d = Audited(sequence(stage("a", soak="0d"), stage("b", soak="0d")), [cluster("b-1")])
    d.release({"1.30": V31})
    out = d.command("pause", at=MIN, command_id="c1", rollout_id="main-1")
    out += d.command("resume", at=2 * MIN, command_id="c2", rollout_id="main-1")
    out += d.command("cancel", at=3 * MIN, command_id="c3", rollout_id="main-1")
    assert acks(out) == [("c1", True, "pause applied"), ("c2", True, "resume applied"), ("c3", True, "cancel applied")]
    assert rollout_ends(out) == [
        ("main-1", "PAUSED", "paused by an operator"),
        ("main-1", "CANCELLED", "cancelled by an operator"),
    ]
    assert {s.spec.name: [stage_track_state(s, t) for t in (0, 1)] for s in d.state.stages} == {
        "a": ["CANCELLED", "CANCELLED"],
        "b": ["CANCELLED", "CANCELLED"],
    }


CHANGED = "soak changed by the sequence (SEQ-7)"


def test_seq_7_a_changed_soak_reaches_a_soak_under_way() -> None:
    """a soaks 7 days from 10m; a change to 3 days at 1d recomputes the end from when the soak began
    (as OPS-2 does), announced with the new end; at 3d10m it completes and qualifies for b."""
    seq = lambda soak: sequence(stage("a", soak=soak), stage("b", soak="1d"))  # noqa: E731
    d = Audited(seq("7d"), [cluster("a-1"), cluster("b-1")])
    d.start(V31, (CP,))
    out = d.finish(["a-1"], CP, at=10 * MIN, ready=True)
    assert [(c.state.value, c.until) for c in out if isinstance(c, StageTransition)] == [
        ("SOAKING", T0 + 10 * MIN + 7 * DAY)
    ]
    out = d.send(SequenceChange(command_id="s1", sequence=seq("3d")), at=DAY)
    assert acks(out) == [("s1", True, "sequence change applied")]
    assert [(c.stage, c.state.value, c.until, c.reason) for c in out if isinstance(c, StageTransition)] == [
        ("a", "SOAKING", T0 + 10 * MIN + 3 * DAY, f"all eligible clusters upgraded: {CHANGED}")
    ]
    out = d.wake(at=10 * MIN + 3 * DAY)
    assert transitions(out) == [("a", "controlPlane", "COMPLETE", V31), ("b", "controlPlane", "IN_PROGRESS", V31)]
    # shortened below what has already elapsed: complete at once
    d2 = Audited(seq("7d"), [cluster("a-1"), cluster("b-1")])
    d2.start(V31, (CP,))
    d2.finish(["a-1"], CP, at=10 * MIN, ready=True)
    out = d2.send(SequenceChange(command_id="s1", sequence=seq("0d")), at=DAY)
    assert transitions(out) == [("a", "controlPlane", "COMPLETE", V31), ("b", "controlPlane", "IN_PROGRESS", V31)]


# SEQ-2


def test_seq_2_a_sequence_change_that_puts_a_cluster_in_two_stages_is_refused_with_that_reason() -> None:
    seq = sequence(stage("a", soak="0d"), stage("b", soak="0d"))
    d = Audited(seq, [cluster("a-1"), cluster("a-2"), cluster("b-1")])
    d.release({"1.30": V31})
    both = sequence(stage("a", soak="0d"), stage("b", soak="0d", clusterNames=["a-2", "b-1"]))
    out = d.send(SequenceChange(command_id="s1", sequence=both), at=MIN)
    assert acks(out) == [
        ("s1", False, "cluster a-2 would be in stages a and b; a cluster belongs to one stage (SEQ-2)")
    ]
    assert d.state.sequence == seq
    assert d.state.clusters["a-2"].stage == 0


# GATE-1


def test_gate_1_a_partition_hands_out_its_next_clusters_in_member_order_across_versions() -> None:
    """c-1 and c-3 need 1.32.9 (on 1.31), c-2 needs 1.31.13 (on 1.30): one version per batch, and the
    batches follow the members' order, not the lowest version first."""
    d = Audited(
        sequence(stage("c", soak="0d", rolloutStrategy={"maxNew": 1})),
        [cluster("c-1", V31), cluster("c-2"), cluster("c-3", V31)],
    )
    out = d.release({"1.30": V31, "1.31": V32})
    assert advances(out) == [
        ("c", "controlPlane", V32, ["c-1"]),
        ("c", "controlPlane", V31, ["c-2"]),
        ("c", "controlPlane", V32, ["c-3"]),
    ]
