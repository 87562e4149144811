"""The shared checker's GATE-1 and GATE-3 counts on the shrunk scenarios of the seeds that once
stretched them, and real breaches of the same shapes, which it must flag with their exact lines.

Each kept scenario under gates/ works its numbers through against SPEC in its header: the report
is right, and the plain checker says nothing on it. Each breach is the same report with one fact
changed so that SPEC's own count breaks the gate; the checker must report that batch.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from oracle import load_checker

from rollout_planner.simulation.runner import Simulator
from rollout_planner.simulation.scenario import Scenario

HERE = Path(__file__).resolve().parent
GATES = HERE / "gates"
FINDINGS = HERE.parents[0] / "engine" / "findings"
RESULT_AND_NEXT_START = FINDINGS / "gate1-result-and-next-start-at-one-instant.yaml"
BY_A_NEWER_RELEASE = GATES / "gate3-past-its-target-by-a-newer-release.yaml"
INELIGIBLE_THEN = GATES / "gate3-ineligible-then-upgraded-by-a-later-rollout.yaml"
TARGETED_AFTER = GATES / "gate3-targeted-only-after-another-release.yaml"
NODES_ONLY = GATES / "gate3-nodes-only-target-on-the-control-plane-track.yaml"


def _run(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    doc = yaml.safe_load(path.read_text())
    return doc, Simulator(Scenario.model_validate(doc)).run().as_json()


def _check(path: Path, doc: dict[str, Any], report: dict[str, Any]) -> list[str]:
    """Every line the oracle's copy of the shared checker reports on `report` as a run of `doc` (its
    two closer readings, checker_rulings.py, touch neither on-demand tracks nor ties here)."""
    case = load_checker().Case(path, doc, report)
    case.run()
    return list(case.errors)


def _gate3(partition: str, stage: str, t: float, not_ready: int) -> str:
    return (
        f"GATE-3: batch for partition {partition} of {stage} at t={t} with {not_ready} NotReady partitions "
        "before it, maxUnavailablePartitions 0"
    )


@pytest.mark.parametrize("path", [RESULT_AND_NEXT_START, *sorted(GATES.glob("*.yaml"))], ids=lambda p: p.stem)
def test_gate_1_and_gate_3_counted_exactly_on_a_right_report(path: Path) -> None:
    """GATE-1 / GATE-3: the checker reports nothing on these right reports (each header says why)."""
    doc, report = _run(path)
    assert _check(path, doc, report) == []


def test_gate_1_a_cluster_that_left_the_partition_still_upgrading_for_it_is_a_breach() -> None:
    """GATE-1: the seed-281 report with c-008's upgrade from its old partition reporting at 11m, not
    10m (and so not handed out again at 10m): it still holds that partition's slot at 10m, so the
    batch of Partition 4 - 6 then breaches the gate."""
    doc, report = _run(RESULT_AND_NEXT_START)
    tampered = copy.deepcopy(report)
    tampered["batches"] = [b for b in tampered["batches"] if not (b["t"] == 600.0 and b["clusters"] == ["c-008"])]
    events = []
    for e in tampered["clusterEvents"]:
        if e["cluster"] == "c-008" and e["t"] == 600.0 and e["event"] == "started":
            continue
        if e["cluster"] == "c-008" and e["t"] == 600.0 and e["event"] == "succeeded":
            e = {**e, "t": 660.0}
        events.append(e)
    tampered["clusterEvents"] = sorted(events, key=lambda e: e["t"])
    errors = _check(RESULT_AND_NEXT_START, doc, tampered)
    assert "GATE-1: batch at t=600.0 in s0/Partition 4 - 6 with 2 unavailable, maxUnavailable 2" in errors


def test_gate_1_a_second_batch_beside_a_handed_out_cluster_is_a_breach() -> None:
    """GATE-1: a partition of 3 with maxUnavailable 1 that hands out c-2 beside c-1 in flight."""
    doc = {
        "name": "gate1-plain-breach",
        "clusters": [{"name": f"c-{i}", "labels": {"env": "s0"}, "version": "1.30.1-gke.100"} for i in (1, 2, 3)],
        "sequence": {
            "name": "main",
            "stages": [
                {
                    "name": "s0",
                    "clusterSelector": {"matchLabels": {"env": "s0"}},
                    "rolloutStrategy": {"maxUnavailable": 1, "maxNew": 1},
                }
            ],
        },
        "events": [{"at": "0s", "releaseTarget": {"targets": {"1.30": "1.30.9-gke.100"}}}],
        "until": "1d",
    }
    report = Simulator(Scenario.model_validate(doc)).run().as_json()
    assert _check(Path("gate1-plain-breach.yaml"), doc, report) == []
    second = next(b for b in report["batches"] if b["clusters"] == ["c-2"])
    second["t"] = 0.0  # c-1 is still upgrading then
    report["batches"].sort(key=lambda b: b["t"])
    errors = _check(Path("gate1-plain-breach.yaml"), doc, report)
    assert errors == ["GATE-1: batch at t=0.0 in s0/All with 1 unavailable, maxUnavailable 1"]


def _offline(report: dict[str, Any], *, clusters: tuple[str, ...], t: float) -> dict[str, Any]:
    """`report` with each of `clusters` going offline at `t`."""
    tampered = copy.deepcopy(report)
    tampered["clusterEvents"] += [{"t": t, "cluster": c, "event": "notReady"} for c in clusters]
    tampered["clusterEvents"].sort(key=lambda e: e["t"])
    return tampered


@pytest.mark.parametrize(
    ("path", "clusters", "line"),
    [
        (BY_A_NEWER_RELEASE, ("c-010", "c-029"), _gate3("pbc", "s0", 3600.0, 1)),
        (INELIGIBLE_THEN, ("c-002",), _gate3("Partition 4 - 6", "s1", 3600.0, 1)),
    ],
    ids=["beyond-target", "ineligible-then"],
)
def test_gate_3_the_same_cluster_not_ready_is_a_breach(path: Path, clusters: tuple[str, ...], line: str) -> None:
    """GATE-3 via GATE-2: a cluster the rollout will not upgrade is done only when ready; the report
    with that cluster (the last one named) offline from 1m before the batch has its partition
    NotReady before the next, and without it offline the checker says nothing.
    beyond-target: at 1h pa = {c-010, c-029}; c-010 (main-1's own upgrade) offline alone is 1 not
    done <= maxUnavailable 1; with c-029 (beyond main-1's target) offline too, 2 > 1.
    ineligible-then: Partition 0 - 2 = {c-000 handed out, c-002 offline}, 2 not done > 1; the
    INELIGIBLE c-003 and c-016 of Partition 2 - 4 are done, so one NotReady partition, not two."""
    doc, report = _run(path)
    t = float(line.split(" at t=")[1].split(" ")[0])
    assert _check(path, doc, _offline(report, clusters=clusters[:-1], t=t - 60)) == []
    assert line in _check(path, doc, _offline(report, clusters=clusters, t=t - 60))


def test_gate_3_a_cluster_below_its_own_target_is_a_breach() -> None:
    """GATE-3 via GATE-2: c-029's nodes reported on 1.29.10 instead of 1.29.18, below main-1's
    target for it (1.29.16): not done though ready. With c-010 offline from 59m (1 not done, which
    alone leaves pa Ready under maxUnavailable 1), pa has 2 not done and is NotReady before pbc's
    nodes batch at 1h."""
    doc, report = _run(BY_A_NEWER_RELEASE)
    tampered = _offline(report, clusters=("c-010",), t=3540.0)
    assert _check(BY_A_NEWER_RELEASE, doc, tampered) == []
    lowered = [
        e
        for e in tampered["clusterEvents"]
        if e["cluster"] == "c-029" and e.get("track") == "nodes" and e["event"] == "succeeded"
    ]
    assert [e["version"] for e in lowered] == ["1.29.18-gke.7000"]
    lowered[0]["version"] = "1.29.10-gke.100"
    assert _gate3("pbc", "s0", 3600.0, 1) in _check(BY_A_NEWER_RELEASE, doc, tampered)


def _with_a_cluster_starting_on(path: Path, *, cluster: str, version: str) -> list[str]:
    """The checker's lines on the scenario's own report, judged against the scenario with `cluster`
    starting on `version`."""
    doc, report = _run(path)
    tampered = copy.deepcopy(doc)
    next(c for c in tampered["clusters"] if c["name"] == cluster)["version"] = version
    return _check(path, tampered, report)


def test_gate_3_a_cluster_the_release_targets_by_its_minor_then_is_a_breach() -> None:
    """GATE-3 via GATE-2 and VER-1: the same report, with c-010 starting on 1.31 (the minor rel-2
    targets at 30m): it is pending for rel-2 then, so Partition 0 - 3 is NotReady before 3 - 5."""
    errors = _with_a_cluster_starting_on(TARGETED_AFTER, cluster="c-010", version="1.31.9-gke.200")
    assert _gate3("Partition 3 - 5", "s0", 1800.0, 1) in errors


def test_gate_3_a_cluster_the_release_targets_on_the_judged_track_is_a_breach() -> None:
    """GATE-3 via GATE-2, SOAK-1 and VER-1: the same report, with c-113's control plane on 1.29.20
    (the release holds 1.29.25 for it): pending on the control-plane track, so Partition 10 - 15 has
    two not done and is NotReady before Partition 15 - 20."""
    errors = _with_a_cluster_starting_on(NODES_ONLY, cluster="c-113", version="1.29.20-gke.100")
    assert _gate3("Partition 15 - 20", "s0", 140400.0, 1) in errors


def test_gate_3_a_cluster_handed_out_earlier_in_the_instant_is_not_done() -> None:
    """GATE-3 via GATE-2 and SOAK-1 (unavailable to both tracks while an upgrade runs): the same
    report with c-010 handed out at 30m, just before rel-2's batch, by another rollout. rel-2 does
    not target it, but it is not ready, so not done: Partition 0 - 3 is NotReady before 3 - 5."""
    doc, report = _run(TARGETED_AFTER)
    tampered = copy.deepcopy(report)
    other = {"t": 1800.0, "stage": "s0", "track": "controlPlane", "partition": "Partition 0 - 3"}
    tampered["batches"].insert(0, {**other, "version": "1.30.25-gke.100", "clusters": ["c-010"]})
    upgrade = {"cluster": "c-010", "track": "controlPlane", "version": "1.30.25-gke.100"}
    tampered["clusterEvents"] += [
        {"t": 1800.0, **upgrade, "event": "started"},
        {"t": 1800.0, "cluster": "c-010", "event": "notReady"},
        {"t": 2400.0, **upgrade, "event": "succeeded"},
    ]
    tampered["clusterEvents"].sort(key=lambda e: e["t"])
    assert _gate3("Partition 3 - 5", "s0", 1800.0, 1) in _check(TARGETED_AFTER, doc, tampered)
