"""SEQ-2, SEQ-6 and SOAK-4b: inventory changes mid-rollout, through `decide` and through the simulator."""

from __future__ import annotations

from pathlib import Path

from enginekit import CP, DAY, MIN, NODES, V30, V31, Driver, advances, cluster, notices, sequence, stage, transitions

from rollout_planner.simulation.runner import simulate
from rollout_planner.simulation.scenario import Scenario

REL = {"1.30": V31}


def slow(*extra: str) -> Driver:
    return Driver(
        sequence(stage("a", soak="1d", rolloutStrategy={"maxNew": 1, "maxUnavailable": 0}), stage("b")),
        [cluster("a-1"), cluster("a-2"), cluster("b-1"), *[cluster(n) for n in extra]],
    )


def test_seq_6_joining_cluster_is_targeted_and_upgraded_in_name_order() -> None:
    d = slow()
    d.release(REL)
    out = d.upsert(cluster("a-0", labels={"env": "a"}), at=20 * MIN)
    assert ("SEQ-6", "a-0") in notices(out)
    d.finish(["a-1"], CP, at=10 * MIN + 20 * MIN)
    d.finish(["a-1"], NODES, at=60 * MIN)
    assert advances(d.ready(["a-1"], at=61 * MIN)) == [("a", "controlPlane", V31, ["a-0"])]


def test_seq_6_removed_cluster_no_longer_holds_the_stage() -> None:
    d = slow()
    d.release(REL)
    out = d.remove("a-2", at=5 * MIN)
    assert ("SEQ-6", "a-2") in notices(out)
    d.finish(["a-1"], CP, at=10 * MIN)
    d.finish(["a-1"], NODES, at=40 * MIN)
    out = d.ready(["a-1"], at=41 * MIN)
    assert sorted(transitions(out)) == [("a", "controlPlane", "SOAKING", V31), ("a", "nodes", "SOAKING", V31)]


def test_seq_6_relabelled_cluster_moves_to_an_earlier_stage_and_is_upgraded_there() -> None:
    d = slow()
    d.release(REL)
    out = d.upsert(cluster("b-1", labels={"env": "a"}), at=5 * MIN)
    assert ("SEQ-6", "b-1") in notices(out)
    assert d.state.stages[0].members == ["a-1", "a-2", "b-1"]
    assert d.state.stages[1].members == []
    assert d.state.clusters["b-1"].stage == 0
    assert d.state.clusters["b-1"].partition == 0


def test_seq_2_inventory_change_into_two_stages_is_reported() -> None:
    d = Driver(sequence(stage("a"), stage("b", clusterNames=["x-1"])), [cluster("a-1")])
    out = d.upsert(cluster("x-1", labels={"env": "a"}), at=0)
    assert ("SEQ-2", "x-1") in notices(out)
    assert d.state.clusters["x-1"].stage is None


def scenario(**raw: object) -> Scenario:
    base = {"name": "t", "simulation": {"upgradeDuration": {"controlPlane": "10m", "nodes": "30m"}, "readyAfter": "1m"}}
    return Scenario.model_validate({**base, **raw})


def seconds(days: float = 0, hours: float = 0, minutes: float = 0) -> float:
    return days * DAY + hours * 3600 + minutes * 60


def test_seq_6_join_and_relabel_in_the_simulator() -> None:
    """check.py knows only the initial fleet, so joins are checked here rather than as scenario files."""
    rep = simulate(
        scenario(
            clusters=[{"name": n, "labels": {"env": n[0]}, "version": V30} for n in ("a-1", "a-2", "b-1", "b-2")],
            sequence={
                "name": "main",
                "channel": "regular",
                "stages": [
                    {
                        "name": "a",
                        "clusterSelector": {"matchLabels": {"env": "a"}},
                        "soak": "1d",
                        "rolloutStrategy": {"maxNew": 1, "maxUnavailable": 0},
                    },
                    {"name": "b", "clusterSelector": {"matchLabels": {"env": "b"}}, "soak": "1d"},
                ],
            },
            events=[
                {"at": "0s", "releaseTarget": {"targets": REL}},
                {"at": "20m", "inventory": {"upsert": {"name": "a-3", "labels": {"env": "a"}, "version": V30}}},
                {"at": "30m", "inventory": {"upsert": {"name": "b-2", "labels": {"env": "a"}, "version": V30}}},
            ],
            until="10d",
        )
    ).as_json()
    cp = [(b["t"], b["clusters"]) for b in rep["batches"] if b["stage"] == "a" and b["track"] == "controlPlane"]
    assert cp == [
        (0, ["a-1"]),
        (seconds(minutes=41), ["a-2"]),
        (seconds(minutes=82), ["a-3"]),
        (seconds(minutes=123), ["b-2"]),
    ]
    soak = [
        t["t"] for t in rep["transitions"] if (t["stage"], t["track"], t["state"]) == ("a", "controlPlane", "SOAKING")
    ]
    assert soak == [seconds(minutes=164)]
    assert rep["final"]["clusters"]["a-3"]["controlPlane"] == V31
    assert rep["final"]["clusters"]["b-1"]["controlPlane"] == V31


def test_soak_4b_stuck_stage_is_evaluated_again_when_a_cluster_joins() -> None:
    rep = simulate(
        scenario(
            clusters=[
                {"name": "pre-1", "labels": {"env": "pre"}, "version": V30},
                {"name": "prod-1", "labels": {"env": "prod"}, "version": "1.32.9-gke.1108000"},
            ],
            sequence={
                "name": "main",
                "channel": "regular",
                "stages": [
                    {"name": "pre", "clusterSelector": {"matchLabels": {"env": "pre"}}, "soak": "1d"},
                    {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}, "soak": "1d"},
                ],
            },
            events=[
                {"at": "0s", "releaseTarget": {"targets": REL}},
                {"at": "3d", "inventory": {"upsert": {"name": "prod-2", "labels": {"env": "prod"}, "version": V30}}},
            ],
            until="10d",
        )
    ).as_json()
    prod_cp = [(t["t"], t["state"]) for t in rep["transitions"] if (t["stage"], t["track"]) == ("prod", "controlPlane")]
    assert prod_cp[:3] == [
        (seconds(1, minutes=10), "STUCK"),
        (seconds(3), "IN_PROGRESS"),
        (seconds(3, minutes=10), "SOAKING"),
    ]
    assert [(b["t"], b["clusters"]) for b in rep["batches"] if b["stage"] == "prod"][:1] == [(seconds(3), ["prod-2"])]
    assert rep["final"]["clusters"]["prod-1"]["status"] == "SKIPPED_NEWER"
    assert Path(__file__).name == "test_rules_seq6.py"
