"""GATE-1..6 driven through `decide` with explicit events; the exact StageAdvance and WaitChanged commands."""

from __future__ import annotations

from enginekit import (
    CP,
    MIN,
    NODES,
    V30,
    V31,
    V32,
    V33,
    Driver,
    advances,
    cluster,
    names,
    sequence,
    stage,
    transitions,
    wait_for,
)

from rollout_planner.engine.views import stage_view

REL = {"1.30": V31}


def fleet(count: int, **strategy: object) -> Driver:
    return Driver(sequence(stage("a", soak="0d", rolloutStrategy=strategy)), [cluster(n) for n in names("a", count)])


def test_gate_1_first_batch_goes_whatever_max_unavailable_says() -> None:
    d = fleet(5, maxNew=3, maxUnavailable=0)
    out = d.release(REL)
    assert advances(out) == [("a", "controlPlane", V31, ["a-01", "a-02", "a-03"])]
    assert wait_for(out, CP, "GATE-1") == [("All", {"unavailable": 3, "maxUnavailable": 0})]


def test_gate_1_second_batch_waits_until_fewer_than_max_unavailable() -> None:
    d = fleet(4, maxNew=2, maxUnavailable=1)
    assert advances(d.release(REL)) == [("a", "controlPlane", V31, ["a-01", "a-02"])]
    out = d.finish(["a-01", "a-02"], CP, at=10 * MIN)
    assert advances(out) == [("a", "nodes", V31, ["a-01", "a-02"])]  # SOAK-1: nodes right away
    d.finish(["a-01", "a-02"], NODES, at=40 * MIN)
    assert advances(d.ready(["a-01"], at=41 * MIN)) == []  # a-02 still unavailable: 1 >= 1
    assert advances(d.ready(["a-02"], at=41 * MIN)) == [("a", "controlPlane", V31, ["a-03", "a-04"])]


def test_gate_1_further_batch_goes_while_unavailable_below_max_unavailable() -> None:
    d = fleet(6, maxNew=2, maxUnavailable=3)
    out = d.release(REL)
    # 0 unavailable -> first batch; 2 < 3 -> second batch; 4 >= 3 -> wait
    assert advances(out) == [("a", "controlPlane", V31, ["a-01", "a-02"]), ("a", "controlPlane", V31, ["a-03", "a-04"])]
    assert wait_for(out, CP, "GATE-1") == [("All", {"unavailable": 4, "maxUnavailable": 3})]


def test_gate_1_offline_clusters_count_as_unavailable() -> None:
    d = fleet(4, maxNew=1, maxUnavailable=1)
    d.ready(["a-04"], at=0, ready=False)
    assert advances(d.release(REL)) == [("a", "controlPlane", V31, ["a-01"])]
    d.finish(["a-01"], CP, at=10 * MIN)
    d.finish(["a-01"], NODES, at=40 * MIN)
    assert advances(d.ready(["a-01"], at=41 * MIN)) == []  # a-04 offline: 1 >= 1
    assert advances(d.ready(["a-04"], at=50 * MIN)) == [("a", "controlPlane", V31, ["a-02"])]


def test_gate_1_each_version_gets_its_own_batches_in_one_partition() -> None:
    d = Driver(sequence(stage("a", soak="0d")), [cluster("a-1"), cluster("a-2", V32), cluster("a-3")])
    out = d.release({"1.30": V31, "1.32": V33})
    assert sorted(advances(out)) == [("a", "controlPlane", V31, ["a-1", "a-3"]), ("a", "controlPlane", V33, ["a-2"])]


def test_gate_1_never_more_than_max_new_per_batch() -> None:
    d = fleet(7, maxNew=3)
    assert [len(a[3]) for a in advances(d.release(REL))] == [3, 3, 1]


def test_gate_3_later_partition_waits_while_earlier_partitions_not_ready() -> None:
    part = [
        {"name": "one", "clusterSelector": {"matchLabels": {"p": "1"}}},
        {"name": "two", "clusterSelector": {"matchLabels": {"p": "2"}}},
    ]
    d = Driver(
        sequence(stage("a", soak="0d", rolloutStrategy={"maxUnavailable": 0, "partitions": part})),
        [cluster("a-1", labels={"env": "a", "p": "1"}), cluster("a-2", labels={"env": "a", "p": "2"})],
    )
    out = d.release(REL)
    assert advances(out) == [("a", "controlPlane", V31, ["a-1"])]
    assert wait_for(out, CP, "GATE-3") == [
        ("two", {"notReadyPartitions": 1, "maxUnavailablePartitions": 0, "partitions": ["one"]})
    ]
    d.finish(["a-1"], CP, at=10 * MIN)
    assert advances(d.finish(["a-1"], NODES, at=40 * MIN)) == []
    assert advances(d.ready(["a-1"], at=41 * MIN)) == [("a", "controlPlane", V31, ["a-2"])]


def test_gate_3_max_unavailable_partitions_one_lets_two_partitions_run() -> None:
    d = fleet(9, autoPartitionThreshold=3, autoPartitionSize=3, maxUnavailable=0, maxUnavailablePartitions=1)
    out = d.release(REL)
    assert [a[3] for a in advances(out)] == [["a-01", "a-02", "a-03"], ["a-04", "a-05", "a-06"]]
    assert wait_for(out, CP, "GATE-3") == [
        (
            "Partition 6 - 9",
            {
                "notReadyPartitions": 2,
                "maxUnavailablePartitions": 1,
                "partitions": ["Partition 0 - 3", "Partition 3 - 6"],
            },
        )
    ]


def test_gate_4_max_unavailable_100_percent_moves_through_all_partitions() -> None:
    d = fleet(9, autoPartitionThreshold=3, autoPartitionSize=3)
    assert [a[3] for a in advances(d.release(REL))] == [names("a", 9)[0:3], names("a", 9)[3:6], names("a", 9)[6:9]]


def test_gate_6_max_concurrent_caps_clusters_upgrading_at_once() -> None:
    d = fleet(5, maxConcurrent=2)
    out = d.release(REL)
    assert advances(out) == [("a", "controlPlane", V31, ["a-01", "a-02"])]
    assert wait_for(out, CP, "GATE-6") == [("All", {"inFlight": 2, "maxConcurrent": 2})]
    out = d.finish(["a-01"], CP, at=10 * MIN)
    assert advances(out) == [("a", "nodes", V31, ["a-01"])]  # nodes first, the freed slot goes to them


def test_gate_6_max_failures_pauses_the_stage_with_failure_budget() -> None:
    d = fleet(4, maxNew=2, maxUnavailable=2, maxFailures="50%")
    d.release(REL)
    assert transitions(d.finish(["a-01"], CP, at=10 * MIN, outcome="failed")) == []
    out = d.finish(["a-02"], CP, at=11 * MIN, outcome="failed")
    assert transitions(out) == [("a", "controlPlane", "PAUSED", V31)]
    view = stage_view(d.state, d.state.stages[0])["tracks"]["controlPlane"]
    assert (view["state"], view["reason"], view["counts"]) == ("PAUSED", "FAILURE_BUDGET", {"FAILED": 2, "PAUSED": 2})
    assert advances(d.ready(["a-01", "a-02"], at=1 * 3600)) == []


def test_gate_2_partition_view_counts_not_done_against_max_unavailable() -> None:
    d = fleet(10, maxNew=10, maxUnavailable="10%")
    d.release(REL)
    d.finish(names("a", 10)[:9], CP, at=10 * MIN)
    d.finish(names("a", 10)[:9], NODES, at=40 * MIN)
    d.ready(names("a", 10)[:9], at=41 * MIN)
    part = stage_view(d.state, d.state.stages[0])["tracks"]["controlPlane"]["partitions"][0]
    # STAT-3: a-10 still running -> 1 not done <= maxUnavailable 1 -> Ready
    assert part == {"name": "All", "clusters": 10, "maxUnavailable": 1, "unavailable": 1, "notDone": 1, "ready": True}


def test_v30_is_the_default_fixture_version() -> None:
    assert cluster("x-1").version == V30


def test_stat_5_a_cluster_waiting_for_its_window_is_said_once() -> None:
    """WIN-3, STAT-5: a-1's window is closed when the release comes, so the batch skips it. The
    stage's waits name it once: the wait the dispatch recorded. The scan for windows the dispatch
    did not meet adds nothing here; before, it listed the same wait a second time."""
    window = {"start": "2025-01-01T02:00:00Z", "duration": "1h", "recurrence": "FREQ=DAILY"}
    d = Driver(sequence(stage("a")), [cluster("a-1", maintenanceWindow=window), cluster("a-2")])
    d.release({"1.30": V31}, at=60)
    waits = stage_view(d.state, d.state.stages[0])["tracks"]["controlPlane"]["waits"]
    assert [(w["rule"], w["clusters"]) for w in waits] == [("WIN", ["a-1"])]
