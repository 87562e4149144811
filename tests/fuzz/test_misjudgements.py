"""The argued checker misjudgements (misjudgements.py) on the shrunk scenarios of the seeds that showed
them, and real breaches of the same shape that must stay failures (GATE-1, GATE-3 via GATE-2).

Each kept scenario's header works its numbers through against SPEC. The tests assert the checker's
exact lines, so a changed checker or engine shows up here, and that nothing else is argued away.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from misjudgements import Misjudgement, argue
from oracle import load_checker

from rollout_planner.simulation.runner import Simulator
from rollout_planner.simulation.scenario import Scenario

HERE = Path(__file__).resolve().parent
FINDINGS = HERE.parents[0] / "engine" / "findings"
NEXT_RUN = (Misjudgement.GATE1_NEXT_RUN,)
BEYOND = (Misjudgement.GATE3_BEYOND_TARGET,)
INELIGIBLE = (Misjudgement.GATE3_INELIGIBLE_THEN,)
LOOK_AHEAD = (Misjudgement.GATE3_LOOK_AHEAD,)
OTHER_TRACK = (Misjudgement.GATE3_OTHER_TRACK,)


def _run(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    doc = yaml.safe_load(path.read_text())
    return doc, Simulator(Scenario.model_validate(doc)).run().as_json()


def _argue(path: Path, doc: dict[str, Any], report: dict[str, Any]) -> Any:
    return argue(load_checker(), path, doc, report)


def _argued_with_a_cluster_starting_on(path: Path, *, cluster: str, version: str) -> Any:
    """The scenario's own report, judged against the scenario with `cluster` starting on `version`."""
    doc, report = _run(path)
    tampered = copy.deepcopy(doc)
    next(c for c in tampered["clusters"] if c["name"] == cluster)["version"] = version
    return _argue(path, tampered, report)


@pytest.mark.parametrize(
    ("path", "argued"),
    [
        (
            FINDINGS / "gate1-result-and-next-start-at-one-instant.yaml",
            [(NEXT_RUN, "GATE-1: batch at t=600.0 in s0/Partition 4 - 6 with 2 unavailable, maxUnavailable 2")],
        ),
        (
            HERE / "misjudged" / "gate1-next-run-after-a-sequence-change.yaml",
            [(NEXT_RUN, "GATE-1: batch at t=600.0 in s0/pa with 2 unavailable, maxUnavailable 2")],
        ),
        (
            HERE / "misjudged" / "gate3-past-its-target-by-a-newer-release.yaml",
            [
                (
                    BEYOND,
                    "GATE-3: batch for partition pbc of s0 at t=4200.0 with 1 NotReady partitions before it, "
                    "maxUnavailablePartitions 0",
                )
            ],
        ),
        (
            HERE / "misjudged" / "gate3-past-its-target-after-joining.yaml",
            [
                (
                    BEYOND,
                    f"GATE-3: batch for partition Partition 8 - 9 of s0 at t={t} with 1 NotReady partitions before it, "
                    "maxUnavailablePartitions 0",
                )
                for t in (315065.0, 315665.0)
            ],
        ),
        (
            HERE / "misjudged" / "gate3-ineligible-then-upgraded-by-a-later-rollout.yaml",
            [
                (
                    INELIGIBLE,
                    f"GATE-3: batch for partition Partition {p} of s1 at t={t} with {n} NotReady partitions before it, "
                    "maxUnavailablePartitions 0",
                )
                for p, t, n in [("4 - 6", 3600.0, 2), ("4 - 6", 7200.0, 2), ("6 - 8", 9060.0, 1), ("6 - 8", 12660.0, 1)]
            ],
        ),
        (
            HERE / "misjudged" / "gate3-targeted-only-after-another-release.yaml",
            [
                (
                    LOOK_AHEAD,
                    f"GATE-3: batch for partition Partition 3 - 5 of s0 at t={t} with 1 NotReady partitions before it, "
                    "maxUnavailablePartitions 0",
                )
                for t in (1800.0, 2400.0)
            ],
        ),
        (
            HERE / "misjudged" / "gate3-nodes-only-target-on-the-control-plane-track.yaml",
            [
                (
                    OTHER_TRACK,
                    "GATE-3: batch for partition Partition 15 - 20 of s0 at t=140400.0 with 1 NotReady partitions "
                    "before it, maxUnavailablePartitions 0",
                )
            ],
        ),
    ],
    ids=lambda v: v.stem if isinstance(v, Path) else "",
)
def test_a_known_checker_approximation_is_argued_and_fails_nothing(
    path: Path, argued: list[tuple[tuple[Misjudgement, ...], str]]
) -> None:
    """GATE-1 / GATE-3: every line check.py reports on these right reports is argued, by its kind."""
    doc, report = _run(path)
    verdict = _argue(path, doc, report)
    assert verdict.failures == []
    assert verdict.argued == argued


def test_gate_1_a_cluster_that_left_the_partition_still_upgrading_for_it_is_a_breach() -> None:
    """GATE-1: the seed-281 report with c-008's upgrade from its old partition reporting at 11m, not
    10m (and so not handed out again at 10m): it still holds that partition's slot at 10m, so the
    batch of Partition 4 - 6 then breaches the gate, and the line stays a failure."""
    path = FINDINGS / "gate1-result-and-next-start-at-one-instant.yaml"
    doc, report = _run(path)
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
    verdict = _argue(path, doc, tampered)
    line = "GATE-1: batch at t=600.0 in s0/Partition 4 - 6 with 2 unavailable, maxUnavailable 2"
    assert line in verdict.failures


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
    second = next(b for b in report["batches"] if b["clusters"] == ["c-2"])
    second["t"] = 0.0  # c-1 is still upgrading then
    report["batches"].sort(key=lambda b: b["t"])
    verdict = _argue(Path("gate1-plain-breach.yaml"), doc, report)
    assert "GATE-1: batch at t=0.0 in s0/All with 1 unavailable, maxUnavailable 1" in verdict.failures
    assert verdict.argued == []


@pytest.mark.parametrize(
    ("path", "cluster", "line"),
    [
        (
            HERE / "misjudged" / "gate3-past-its-target-by-a-newer-release.yaml",
            "c-029",
            "GATE-3: batch for partition pbc of s0 at t=4200.0 with 1 NotReady partitions before it, "
            "maxUnavailablePartitions 0",
        ),
        (
            HERE / "misjudged" / "gate3-ineligible-then-upgraded-by-a-later-rollout.yaml",
            "c-002",
            "GATE-3: batch for partition Partition 4 - 6 of s1 at t=3600.0 with 2 NotReady partitions before it, "
            "maxUnavailablePartitions 0",
        ),
    ],
    ids=["beyond-target", "ineligible-then"],
)
def test_gate_3_the_same_cluster_not_ready_is_a_breach(path: Path, cluster: str, line: str) -> None:
    """GATE-3 via GATE-2: a cluster the rollout will not upgrade is done only when ready; the report
    with that cluster offline from 1m before the batch keeps the GATE-3 line a failure."""
    doc, report = _run(path)
    t = float(line.split(" at t=")[1].split(" ")[0])
    tampered = copy.deepcopy(report)
    tampered["clusterEvents"].append({"t": t - 60, "cluster": cluster, "event": "notReady"})
    tampered["clusterEvents"].sort(key=lambda e: e["t"])
    verdict = _argue(path, doc, tampered)
    assert line in verdict.failures
    assert all(not a.startswith(line.split(" with ")[0]) for _, a in verdict.argued)


def test_gate_3_a_cluster_below_its_own_target_is_a_breach() -> None:
    """GATE-3 via GATE-2: c-029's nodes reported on 1.29.10 instead of 1.29.18, below main-1's
    target for it (1.29.16): not done though ready, so partition pa is NotReady before pbc."""
    path = HERE / "misjudged" / "gate3-past-its-target-by-a-newer-release.yaml"
    doc, report = _run(path)
    tampered = copy.deepcopy(report)
    lowered = [
        e
        for e in tampered["clusterEvents"]
        if e["cluster"] == "c-029" and e.get("track") == "nodes" and e["event"] == "succeeded"
    ]
    assert [e["version"] for e in lowered] == ["1.29.18-gke.7000"]
    lowered[0]["version"] = "1.29.10-gke.100"
    verdict = _argue(path, doc, tampered)
    line = "GATE-3: batch for partition pbc of s0 at t=4200.0 with 1 NotReady partitions before it, "
    assert line + "maxUnavailablePartitions 0" in verdict.failures


def test_gate_3_a_cluster_the_release_targets_by_its_minor_then_is_a_breach() -> None:
    """GATE-3 via GATE-2 and VER-1: the same report, with c-010 starting on 1.31 (the minor rel-2
    targets at 30m): it is pending for rel-2 then, so Partition 0 - 3 is NotReady before 3 - 5."""
    path = HERE / "misjudged" / "gate3-targeted-only-after-another-release.yaml"
    verdict = _argued_with_a_cluster_starting_on(path, cluster="c-010", version="1.31.9-gke.200")
    line = "GATE-3: batch for partition Partition 3 - 5 of s0 at t=1800.0 with 1 NotReady partitions before it, "
    assert line + "maxUnavailablePartitions 0" in verdict.failures


def test_gate_3_a_cluster_the_release_targets_on_the_judged_track_is_a_breach() -> None:
    """GATE-3 via GATE-2, SOAK-1 and VER-1: the same report, with c-113's control plane on 1.29.20
    (the release holds 1.29.25 for it): pending on the control-plane track, so Partition 10 - 15 has
    two not done and is NotReady before Partition 15 - 20."""
    path = HERE / "misjudged" / "gate3-nodes-only-target-on-the-control-plane-track.yaml"
    verdict = _argued_with_a_cluster_starting_on(path, cluster="c-113", version="1.29.20-gke.100")
    line = "GATE-3: batch for partition Partition 15 - 20 of s0 at t=140400.0 with 1 NotReady partitions before it, "
    assert line + "maxUnavailablePartitions 0" in verdict.failures


def test_gate_3_a_cluster_handed_out_earlier_in_the_instant_is_not_done() -> None:
    """GATE-3 via GATE-2 and SOAK-1 (unavailable to both tracks while an upgrade runs): the same
    report with c-010 handed out at 30m, just before rel-2's batch, by another rollout. rel-2 does
    not target it, but it is not ready, so not done: Partition 0 - 3 stays NotReady and the line a
    failure (the checker's own `ready_at` passes a `notReady` of that very instant)."""
    path = HERE / "misjudged" / "gate3-targeted-only-after-another-release.yaml"
    doc, report = _run(path)
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
    verdict = _argue(path, doc, tampered)
    line = "GATE-3: batch for partition Partition 3 - 5 of s0 at t=1800.0 with 1 NotReady partitions before it, "
    assert line + "maxUnavailablePartitions 0" in verdict.failures
