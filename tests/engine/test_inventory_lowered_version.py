"""An inventory update that lowers a cluster's version (a rollback, a corrected record) is what the
cluster runs: the planner takes it, says so on the progress stream (STAT-5), and reckons the
cluster's targets from it, so its control plane never gets an upgrade more than one minor above the
version the inventory reports (VER-6). While an upgrade is in flight on that track, its result says
what the cluster runs; the notice says that instead.

Before: the lower version was ignored without a word, and the cluster's control plane was upgraded
from 1.30 to 1.32, two minors above what the inventory said it ran."""

from __future__ import annotations

from enginekit import CP, V30, V31, V32, Driver, advances, cluster, sequence, stage

from rollout_common.commands import Notice
from rollout_common.status import ClusterStatus
from rollout_planner.engine.snapshot import dump, load
from rollout_planner.engine.views import cluster_status

V29 = "1.29.8-gke.1000"


def _lowered(commands: list[object]) -> list[tuple[str | None, str | None, str]]:
    return [(c.cluster, c.stage, c.message) for c in commands if isinstance(c, Notice) and c.code == "VERSION_LOWERED"]


def test_ver_6_stat_5_a_lower_inventory_version_is_taken_said_and_targets_follow_it() -> None:
    d = Driver(sequence(stage("a")), [cluster("a-01", V31)])
    out = d.upsert(cluster("a-01", V30), at=1)
    assert _lowered(out) == [
        (
            "a-01",
            "a",
            f"inventory reports cluster a-01 controlPlane on {V30}, below the {V31} the planner knew; "
            f"taken as the version it runs; its targets are reckoned from {V30} (VER-6), and none goes below {V31} "
            "(START-3)",
        ),
        (
            "a-01",
            "a",
            f"inventory reports cluster a-01 nodes on {V30}, below the {V31} the planner knew; "
            f"taken as the version it runs; its targets are reckoned from {V30} (VER-6), and none goes below {V31} "
            "(START-3)",
        ),
    ]
    # one minor at a time from what it runs: 1.31, not the 1.32 that 1.31 would be eligible for
    assert advances(d.release({"1.30": V31, "1.31": V32}, at=2)) == [("a", "controlPlane", V31, ["a-01"])]
    assert [(c.versions[0].text, c.versions[1].text) for c in [d.state.clusters["a-01"]]] == [(V30, V30)]


def test_ver_6_a_lower_version_while_an_upgrade_is_in_flight_is_said_and_the_result_decides() -> None:
    d = Driver(sequence(stage("a")), [cluster("a-01", V30)])
    assert advances(d.release({"1.30": V31}, at=1)) == [("a", "controlPlane", V31, ["a-01"])]
    out = d.upsert(cluster("a-01", V29), at=2)
    assert _lowered(out) == [
        (
            "a-01",
            "a",
            f"inventory reports cluster a-01 controlPlane on {V29}, below the {V30} the planner knew; "
            f"an upgrade to {V31} is in flight on that track: its result says what it runs",
        ),
        (
            "a-01",
            "a",
            f"inventory reports cluster a-01 nodes on {V29}, below the {V30} the planner knew; "
            f"taken as the version it runs; its targets are reckoned from {V29} (VER-6), and none goes below {V30} "
            "(START-3)",
        ),
    ]
    record = d.state.clusters["a-01"]
    assert (record.versions[0].text, record.versions[1].text) == (V30, V29)
    d.finish(["a-01"], CP, at=3, ready=True)
    assert (record.versions[0].text, record.versions[1].text) == (V31, V29)


def test_a_lower_version_than_a_rollout_upgraded_the_track_to_is_kept_and_said() -> None:
    """A relabel carrying the version the cluster was registered with must not undo the rollout's own
    upgrade (the track would look not done, holding its partition); the cluster's reported versions
    judge whether the upgrade holds (VERSION_MISMATCH)."""
    d = Driver(sequence(stage("a")), [cluster("a-01", V30)])
    d.release({"1.30": V31}, at=1)
    d.finish(["a-01"], CP, at=2, ready=True)
    out = d.upsert(cluster("a-01", V30, labels={"env": "a", "team": "x"}), at=3)
    assert _lowered(out) == [
        (
            "a-01",
            "a",
            f"inventory reports cluster a-01 controlPlane on {V30}, below the {V31} the planner knew; "
            f"kept: a rollout upgraded it to {V31}; its own reported versions are checked against that "
            "(VERSION_MISMATCH)",
        )
    ]
    assert d.state.clusters["a-01"].versions[0].text == V31


def test_a_higher_inventory_version_is_taken_without_a_notice() -> None:
    d = Driver(sequence(stage("a")), [cluster("a-01", V30)])
    assert _lowered(d.upsert(cluster("a-01", V31), at=1)) == []
    assert d.state.clusters["a-01"].versions[0].text == V31


V30_23 = "1.30.23-gke.3000"
V30_16 = "1.30.16-gke.3000"


def test_start_3_no_upgrade_goes_below_the_version_a_cluster_ran_before_the_inventory_lowered_it() -> None:
    """Fuzz seed 19258: a-01 joins on 1.30.23, then the inventory says 1.30.1. The release's 1.30.16 is
    above what it reports but below what it ran: not handed out (no downgrade of what a cluster may
    still run), and the status says why. A version above both goes out. A reloaded planner keeps it."""
    d = Driver(sequence(stage("a")), [cluster("a-01", V30_23)])
    d.upsert(cluster("a-01", "1.30.1-gke.300"), at=1)
    assert advances(d.release({"1.30": V30_16}, at=2)) == []
    assert cluster_status(d.state, d.state.clusters["a-01"]) == (
        ClusterStatus.SKIPPED_NEWER,
        f"ran {V30_23} before the inventory reported 1.30.1-gke.300; newer than {V30_16}",
    )
    reloaded = load(dump(d.state))
    assert reloaded.clusters["a-01"].floor == d.state.clusters["a-01"].floor
    assert [v.text for v in reloaded.clusters["a-01"].floor] == [V30_23, V30_23]
    assert advances(d.release({"1.30": "1.30.30-gke.100"}, at=3, event_id="rel-2")) == [
        ("a", "controlPlane", "1.30.30-gke.100", ["a-01"])
    ]
