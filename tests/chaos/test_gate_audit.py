"""The chaos audit's gate reconstruction on hand-made topics: it must find a batch sent past a closed
GATE-1 or GATE-3, counting membership changes (SEQ-6) and upgrades in flight that left their
partition (SEQ-6a) as FORMAT.md reads them, and must not find one where the planner could not know.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chaos_audit import Audit, Rec, StagePlan, audit, world_completions

NEW = "1.31.13-gke.1023000"
ONE_PARTITION = {"maxNew": 5, "maxUnavailable": 1, "autoPartitionThreshold": 200}
# four members: two partitions of two, strictly one after the other
TWO_PARTITIONS = {
    "maxNew": 5,
    "maxUnavailable": 0,
    "autoPartitionThreshold": 4,
    "autoPartitionSize": "50%",
    "maxUnavailablePartitions": 0,
}


class Topics:
    """Records as the services would have produced them, stamped with the given times (ms)."""

    def __init__(self) -> None:
        self.progress: list[Rec] = []
        self.stage_advance: list[Rec] = []
        self.results: list[Rec] = []
        self.readiness: list[Rec] = []

    def _rec(self, into: list[Rec], topic: str, t: int, body: dict[str, Any]) -> None:
        headers = {"ce_id": f"{topic}-{len(into)}"}
        into.append(Rec(topic, 0, len(into), t, headers, json.loads(json.dumps(body))))

    def batch(self, t: int, stage: str, partition: str, clusters: list[str], n: int) -> None:
        body = {
            "kind": "stage_advance",
            "commandId": f"r/{stage}/controlPlane/{n}",
            "rolloutId": "r",
            "stage": stage,
            "track": "controlPlane",
            "partition": partition,
            "version": NEW,
            "clusters": clusters,
        }
        self._rec(self.progress, "progress", t, body)
        self._rec(self.stage_advance, "stage-advance", t, body)

    def moved(self, t: int, cluster: str, before: str, after: str) -> None:
        message = f"cluster {cluster} moved from {before} to {after}"
        notice = {"kind": "notice", "code": "SEQ-6", "cluster": cluster, "message": message}
        self._rec(self.progress, "progress", t, notice)

    def upgraded(self, t: int, cluster: str, *, ready_after_ms: int | None = 10) -> None:
        body = {"commandId": "x", "cluster": cluster, "track": "controlPlane", "version": NEW, "outcome": "succeeded"}
        self._rec(self.results, "upgrade-results", t, body)
        if ready_after_ms is not None:
            self._rec(self.readiness, "readiness", t + ready_after_ms, {"cluster": cluster, "ready": True})

    def audit(
        self, plans: dict[str, StagePlan], *, completions: Mapping[tuple[str, str, str], int] | None = None
    ) -> Audit:
        return audit(
            plans=plans,
            version=NEW,
            progress=self.progress,
            stage_advance=self.stage_advance,
            results=self.results,
            readiness=self.readiness,
            executor_kills={},
            lease_s=2,
            completions=completions,
        )


def _prod(members: int) -> dict[str, StagePlan]:
    names = tuple(f"c{i:02d}" for i in range(1, members + 1))
    return {"prod": StagePlan("prod", ONE_PARTITION, names)}


def _gate_findings(report: Audit) -> list[str]:
    return [f for f in report.findings if f.startswith("GATE")]


def test_gate1_a_further_batch_while_maxunavailable_clusters_are_unavailable_is_a_violation() -> None:
    """GATE-1: c01..c05 handed out, none back; the next batch of the partition is a violation."""
    topics = Topics()
    topics.batch(1000, "prod", "All", ["c01", "c02", "c03", "c04", "c05"], 1)
    topics.batch(2000, "prod", "All", ["c06", "c07", "c08", "c09", "c10"], 2)
    report = topics.audit(_prod(10))
    assert (report.gate1_checks, report.gate1_violations) == (1, 1)
    assert _gate_findings(report) == [
        "GATE-1: batch r/prod/controlPlane/2 went out while 5 clusters of All were certainly unavailable "
        "(maxUnavailable 1): ['c01', 'c02', 'c03', 'c04', 'c05']"
    ]
    # the timeline: 5 out after the first batch, 10 after the second
    assert [s.unavailable for s in report.timeline["prod/0"]] == [0, 5, 5, 10]


def test_gate1_clusters_back_to_ready_before_the_batch_free_the_partition() -> None:
    topics = Topics()
    topics.batch(1000, "prod", "All", ["c01", "c02", "c03", "c04", "c05"], 1)
    for n, cluster in enumerate(["c01", "c02", "c03", "c04", "c05"]):
        topics.upgraded(1100 + n, cluster)
    topics.batch(2000, "prod", "All", ["c06", "c07", "c08", "c09", "c10"], 2)
    report = topics.audit(_prod(10))
    assert (report.gate1_checks, report.gate1_violations, _gate_findings(report)) == (1, 0, [])
    # the timeline went up to 5 with the first batch and back to 0 before the second
    counts = [s.unavailable for s in report.timeline["prod/0"]]
    assert max(counts) == 5 and counts[-2] == 0


def test_gate1_a_ready_the_planner_could_not_have_seen_yet_does_not_count() -> None:
    """A `ready: true` produced after the batch cannot have let it through: still a violation."""
    topics = Topics()
    topics.batch(1000, "prod", "All", ["c01", "c02", "c03", "c04", "c05"], 1)
    for cluster in ["c01", "c02", "c03", "c04"]:
        topics.upgraded(1100, cluster)
    topics.upgraded(1900, "c05", ready_after_ms=200)
    topics.batch(2000, "prod", "All", ["c06", "c07", "c08", "c09", "c10"], 2)
    report = topics.audit(_prod(10))
    assert report.gate1_violations == 1 and "['c05']" in _gate_findings(report)[0]


def test_gate1_a_cluster_relabelled_away_in_flight_holds_its_slot_until_its_result() -> None:
    """SEQ-6a, FORMAT.md: c05 left the partition while upgrading; it still counts as unavailable."""
    topics = Topics()
    plans = _prod(10) | {"staging": StagePlan("staging", ONE_PARTITION, ("s01",))}
    topics.batch(1000, "prod", "All", ["c01", "c02", "c03", "c04", "c05"], 1)
    for cluster in ["c01", "c02", "c03", "c04"]:
        topics.upgraded(1100, cluster)
    topics.moved(1500, "c05", "prod", "staging")
    topics.batch(2000, "prod", "All", ["c06", "c07", "c08", "c09", "c10"], 2)
    report = topics.audit(plans)
    assert report.membership_changes == 1
    assert _gate_findings(report) == [
        "GATE-1: batch r/prod/controlPlane/2 went out while 1 clusters of All were certainly unavailable "
        "(maxUnavailable 1): ['c05']"
    ]

    # once its upgrade has reported (before the batch), it no longer holds the partition
    topics.upgraded(1600, "c05", ready_after_ms=None)
    assert _gate_findings(topics.audit(plans)) == []


def test_gate3_partitions_recomputed_after_a_join_hold_the_later_ones() -> None:
    """GATE-3 under SEQ-6: a0 joins staging, the partitions are recomputed over five members
    ([a0, s1], [s2, s3], [s4]), and partition 0 now has a member not done: nothing of a later
    partition may go out."""
    topics = Topics()
    plans = {
        "dev": StagePlan("dev", ONE_PARTITION, ("a0",)),
        "staging": StagePlan("staging", TWO_PARTITIONS, ("s1", "s2", "s3", "s4")),
    }
    topics.batch(1000, "staging", "Partition 0 - 2", ["s1", "s2"], 1)
    topics.upgraded(1100, "s1")
    topics.upgraded(1100, "s2")
    topics.moved(1500, "a0", "dev", "staging")
    topics.batch(2000, "staging", "Partition 2 - 4", ["s3"], 2)
    report = topics.audit(plans)
    assert (report.gate3_checks, report.gate3_violations) == (1, 1)
    assert _gate_findings(report) == [
        "GATE-3: batch r/staging/controlPlane/2 of Partition 2 - 4 went out while ['Partition 0 - 2'] were "
        "NotReady (maxUnavailablePartitions 0)"
    ]


def test_a_batch_across_the_recomputed_partitions_is_a_finding() -> None:
    topics = Topics()
    plans = {
        "dev": StagePlan("dev", ONE_PARTITION, ("a0",)),
        "staging": StagePlan("staging", TWO_PARTITIONS, ("s1", "s2", "s3", "s4")),
    }
    topics.moved(500, "a0", "dev", "staging")
    topics.batch(1000, "staging", "Partition 0 - 2", ["s1", "s2"], 1)
    report = topics.audit(plans)
    assert report.batches_gate_checked == 0
    assert any("not all members of one partition of staging" in f for f in report.findings), report.findings


def _upgrade_findings(report: Audit) -> list[str]:
    return [f for f in report.findings if "took effect" in f]


def test_an_upgrade_that_took_effect_twice_is_a_duplicate_and_one_that_never_did_is_missing(tmp_path: Path) -> None:
    """Duplicates come from the driver's own record of completed upgrades, not from `started`
    results: a succeeded result is not enough, and a second `started` is not a duplicate."""
    topics = Topics()
    topics.batch(1000, "prod", "All", ["c01", "c02", "c03"], 1)
    for n, cluster in enumerate(["c01", "c02", "c03"]):
        topics.upgraded(1100 + n, cluster)
    world = tmp_path / "world.log"
    nodes = "".join(f"{c} nodes {NEW} 1\n" for c in ("c01", "c02", "c03"))
    world.write_text(f"c01 controlPlane {NEW} 1\nc02 controlPlane {NEW} 1\nc02 controlPlane {NEW} 2\n{nodes}")
    completions = world_completions(world)
    assert completions[("c02", "controlPlane", NEW)] == 2
    report = topics.audit(_prod(3), completions=completions)
    assert (report.completions, report.duplicates) == (6, 1)
    assert _upgrade_findings(report) == [
        f"('c02', 'controlPlane', '{NEW}') took effect 2 times (the driver's record of completed upgrades)",
        f"c03 controlPlane never took effect on {NEW} (the driver's record)",
    ]
    assert ("c03", "controlPlane") in report.missing_keys
    # without the driver's record nothing can be counted
    assert topics.audit(_prod(3)).duplicates == 0
