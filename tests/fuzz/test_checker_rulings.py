"""The oracle's two closer readings of the shared checker (checker_rulings.py): each found file is
flagged by the plain checker with exactly the line its header quotes and passes the oracle's; a
real breach of the same rule is still flagged by the oracle's checker."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from oracle import load_checker
from shared_checker import load_checker as load_plain_checker

from rollout_planner.simulation.runner import Simulator
from rollout_planner.simulation.scenario import Scenario

FOUND = Path(__file__).resolve().parent / "found"
NODES_ONLY = FOUND / "gate3-a-nodes-only-rollout-leaves-the-control-plane-where-it-is.yaml"
CANCEL_FIRST = FOUND / "ops1-a-cancel-listed-before-a-release-of-its-instant-cancels-nothing.yaml"
GATE3_AT_20M = (
    "GATE-3: batch for partition pbc of s0 at t=1200.0 with 1 NotReady partitions before it, maxUnavailablePartitions 0"
)


def _run(doc: dict[str, Any]) -> dict[str, Any]:
    return Simulator(Scenario.model_validate(doc)).run().as_json()


def _errors(checker: Any, path: Path, doc: dict[str, Any], report: dict[str, Any]) -> list[str]:
    case = checker.Case(path, doc, report)
    case.run()
    return list(case.errors)


def test_gate_3_a_nodes_only_rollout_counts_a_cluster_it_cannot_upgrade_as_done() -> None:
    """START-2, VER-6: the nodes-only rollout of 1.31.26 leaves c-118's control plane on 1.31.15, so
    c-118 is done for it; pa is Ready at 20m (the file's header works the numbers through)."""
    doc = yaml.safe_load(NODES_ONLY.read_text())
    report = _run(doc)
    at_20m = [(b["partition"], b["track"], b["version"], b["clusters"]) for b in report["batches"] if b["t"] == 1200]
    assert at_20m == [
        ("pa", "nodes", "1.31.26-gke.3000", ["c-116"]),
        ("pbc", "nodes", "1.31.26-gke.3000", ["c-091"]),
    ]
    assert _errors(load_plain_checker(), NODES_ONLY, doc, report) == [GATE3_AT_20M]
    assert _errors(load_checker(), NODES_ONLY, doc, report) == []


def test_gate_3_a_cluster_not_ready_still_holds_its_partition_under_a_nodes_only_rollout() -> None:
    """The same report without c-118's `ready` at 20m (it stays not ready from its nodes upgrade on):
    not done on any reading, so pa has two clusters not done against maxUnavailable 1, and pbc's
    batch at 20m breaks GATE-3."""
    doc = yaml.safe_load(NODES_ONLY.read_text())
    tampered = copy.deepcopy(_run(doc))
    ready = {"t": 1200.0, "cluster": "c-118", "track": None, "event": "ready"}
    tampered["clusterEvents"].remove(ready)
    assert GATE3_AT_20M in _errors(load_checker(), NODES_ONLY, doc, tampered)


def test_gate_3_a_control_plane_only_rollout_targets_no_nodes() -> None:
    """START-2: the rulings' checker asks a control-plane-only offer about nodes and gets no."""
    doc = yaml.safe_load(NODES_ONLY.read_text())
    doc["events"][1]["startRollout"]["tracks"] = ["controlPlane"]
    case = load_checker().Case(NODES_ONLY, doc, _run(doc))
    [on_demand] = [o for o in case.offers if "1.31.26-gke.3000" in o.values()]
    assert not case.targeted_by(on_demand, "c-118", "nodes", 1200.0)
    assert case.targeted_by(on_demand, "c-118", "controlPlane", 1200.0)


def test_ops_1_a_cancel_listed_before_a_release_of_its_instant_cancels_nothing() -> None:
    """The cancel at 10m1s is rejected (no rollout active yet); the release listed after it starts
    one whose batches go out at 10m1s and 1h10m1s."""
    doc = yaml.safe_load(CANCEL_FIRST.read_text())
    report = _run(doc)
    assert [(a["command"], a["accepted"], a["reason"]) for a in report["commands"]] == [
        ("releaseTarget", True, None),
        ("cancel", False, "no active rollout"),
    ]
    assert [(b["t"], b["track"]) for b in report["batches"]] == [(601.0, "controlPlane"), (4201.0, "nodes")]
    assert _errors(load_plain_checker(), CANCEL_FIRST, doc, report) == ["OPS-1: batch at t=4201.0 after cancel"]
    assert _errors(load_checker(), CANCEL_FIRST, doc, report) == []


def test_ops_1_a_cancel_listed_after_the_release_of_its_instant_cancels_it() -> None:
    """Listed the other way round the cancel cancels the rollout: the simulator hands out nothing,
    and the batches of the other order, checked against this order, are flagged."""
    doc = yaml.safe_load(CANCEL_FIRST.read_text())
    swapped = copy.deepcopy(doc)
    swapped["events"] = [doc["events"][1], doc["events"][0]]
    assert _run(swapped)["batches"] == []
    assert _errors(load_checker(), CANCEL_FIRST, swapped, _run(doc)) == ["OPS-1: batch at t=4201.0 after cancel"]
