"""SEQ-6a (membership changes while an upgrade is queued, handed out, running, failed or not ready)
and GATE-1 (one ungated first batch per partition position and release), with the audit after
every decision."""

from __future__ import annotations

from typing import Any

from enginekit import CP, MIN, NODES, V30, V31, V32, Driver, advances, cluster, notices, sequence, stage, transitions

from rollout_common.commands import Command, Notice
from rollout_common.events import Event, ReleaseTarget
from rollout_planner.engine.audit import audit

REL = {"1.30": V31}


class Audited(Driver):
    def send(self, *events: Event, at: float | None = None) -> list[Command]:
        out = super().send(*events, at=at)
        assert audit(self.state) == []
        return out


def two_stages(**strategy: Any) -> Audited:
    return Audited(
        sequence(stage("a", soak="1d", rolloutStrategy={"maxNew": 2, "maxUnavailable": 0, **strategy}), stage("b")),
        [cluster("a-1"), cluster("a-2"), cluster("a-3"), cluster("b-1")],
    )


def into_b(name: str) -> Any:
    return cluster(name, labels={"env": "b"})


def test_seq_6a_relabel_while_upgrading_counts_for_the_run_that_handed_it_out() -> None:
    d = two_stages(maxUnavailable="100%")
    assert advances(d.release(REL)) == [
        ("a", "controlPlane", V31, ["a-1", "a-2"]),
        ("a", "controlPlane", V31, ["a-3"]),
    ]
    out = d.upsert(into_b("a-1"), at=5 * MIN)
    assert [(n.code, n.cluster, n.stage) for n in out if isinstance(n, Notice)] == [("SEQ-6", "a-1", "b")]
    out = d.finish(["a-1", "a-2", "a-3"], CP, at=10 * MIN, ready=True)
    assert d.state.clusters["a-1"].versions[0].text == V31
    assert ("a", "controlPlane", "SOAKING", V31) in transitions(out)
    assert all("a-1" not in c for *_, c in advances(out))


def test_seq_6a_failure_after_a_move_releases_the_old_stage_slot() -> None:
    d = two_stages(maxConcurrent=2, maxUnavailable="100%")
    d.release(REL)
    d.upsert(into_b("a-1"), at=5 * MIN)
    out = d.finish(["a-1"], CP, at=10 * MIN, outcome="failed")
    assert d.state.clusters["a-1"].failed[0] == "boom"
    assert advances(out, CP) == [("a", "controlPlane", V31, ["a-3"])]
    assert d.state.stages[0].in_flight == 2


def test_seq_6a_removed_while_upgrading_is_recorded_and_never_handed_out_again() -> None:
    d = two_stages(maxUnavailable=1)
    d.release(REL)
    out = d.remove("a-1", at=5 * MIN)
    assert ("SEQ-6", "a-1") in notices(out)
    assert d.state.stages[0].partitions[0].holding == 2  # GATE-1: a-1's slot is held until its result
    out = d.finish(["a-1"], CP, at=10 * MIN)
    assert "a-1" not in d.state.departed and "a-1" not in d.state.clusters
    assert all("a-1" not in c for *_, c in advances(out))


def test_seq_6a_relabel_while_queued_failed_or_not_ready() -> None:
    d = two_stages(maxUnavailable=0)
    d.release(REL)
    d.ready(["a-3"], at=MIN, ready=False)
    d.upsert(into_b("a-3"), at=2 * MIN)  # queued and not ready
    d.finish(["a-1"], CP, at=10 * MIN, outcome="failed")
    d.upsert(into_b("a-1"), at=11 * MIN)  # failed
    d.finish(["a-2"], CP, at=12 * MIN, ready=True)
    assert d.state.stages[0].runs[0]["main-1"].remaining == 0
    out = d.finish(["a-2"], NODES, at=42 * MIN, ready=True)
    assert sorted(transitions(out)) == [("a", "controlPlane", "SOAKING", V31), ("a", "nodes", "SOAKING", V31)]
    assert d.state.clusters["a-3"].stage == 1


def test_gate_1_two_minors_in_one_strict_partition_share_one_first_batch() -> None:
    d = Audited(
        sequence(stage("a", rolloutStrategy={"maxNew": 5, "maxUnavailable": 0})),
        [cluster("a-1"), cluster("a-2", V31)],
    )
    out = d.send(ReleaseTarget(event_id="r", channel="regular", targets={"1.30": V31, "1.31": V32}))
    assert advances(out) == [("a", "controlPlane", V31, ["a-1"])]
    out = d.finish(["a-1"], CP, at=10 * MIN, ready=True)
    assert advances(out) == [("a", "nodes", V31, ["a-1"])]  # a-1 busy again: the 1.32 batch waits
    out = d.finish(["a-1"], NODES, at=40 * MIN, ready=True)
    assert advances(out, CP) == [("a", "controlPlane", V32, ["a-2"])]


def test_gate_1_a_partition_renamed_by_a_removal_gets_no_second_free_batch() -> None:
    strategy = {"maxNew": 2, "maxUnavailable": 1, "autoPartitionThreshold": 4, "autoPartitionSize": "50%"}
    d = Audited(sequence(stage("a", rolloutStrategy=strategy)), [cluster(f"a-{i:02d}") for i in range(1, 21)])
    assert advances(d.release(REL)) == [("a", "controlPlane", V31, ["a-01", "a-02"])]
    assert [p.name for p in d.state.stages[0].partitions] == ["Partition 0 - 10", "Partition 10 - 20"]
    out = d.remove("a-20", at=MIN)
    assert d.state.stages[0].partitions[0].name != "Partition 0 - 10"
    assert advances(out) == []


def test_seq_6a_nodes_follow_the_new_stage_after_a_move() -> None:
    d = two_stages()
    d.release(REL)
    d.upsert(into_b("a-1"), at=5 * MIN)
    out = d.finish(["a-1", "a-2"], CP, at=10 * MIN, ready=True)
    assert ("a", "nodes", V31, ["a-2"]) in advances(out, NODES)
    assert d.state.clusters["a-1"].target[1] is None
    assert d.state.clusters["a-1"].versions[1].text == V30
