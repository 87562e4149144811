"""Generator findings that the shared checker cannot judge alone, kept with their expectations.

`findings/bus3-failed-cluster-once-per-batch-after-re-release.yaml` re-releases, after a cancel, the
versions the cancelled rollouts had offered; `check.py` attributes every later batch of those
versions to the cancelled rollouts (OPS-1), so the file lives here rather than in tests/scenarios,
and this test accepts exactly that one line besides its own expectations.

`findings/gate1-result-and-next-start-at-one-instant.yaml` (generator seed 281): a cluster that left a
partition reports its result and starts again at one instant; the file's header works the numbers
through. The shared checker used to count it as still in flight there; it now counts it exactly, so
the test asserts the batches and that the checker finds nothing. Each test asserts exactly the
checker's lines, so a changed checker or engine shows up here.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from shared_checker import load_checker

from rollout_planner.simulation.runner import Simulator
from rollout_planner.simulation.scenario import load_scenario

HERE = Path(__file__).resolve().parent


def test_bus_3_a_failed_cluster_is_handed_out_once_per_batch_after_a_re_release() -> None:
    path = HERE / "findings" / "bus3-failed-cluster-once-per-batch-after-re-release.yaml"
    report = Simulator(load_scenario(path)).run().as_json()
    for batch in report["batches"]:
        assert len(set(batch["clusters"])) == len(batch["clusters"]), batch
    case = load_checker().Case(path, yaml.safe_load(path.read_text()), report)
    case.run()
    assert case.errors == ["OPS-1: batch at t=176922.0 after cancel"]


def test_gate_1_a_result_frees_the_slot_of_the_partition_that_handed_it_out_at_that_instant() -> None:
    """GATE-1 with FORMAT's positions: at 10m position 2 counts c-006 only (c-008's result came)."""
    path = HERE / "findings" / "gate1-result-and-next-start-at-one-instant.yaml"
    report = Simulator(load_scenario(path)).run().as_json()
    at_10m = [(b["partition"], b["version"], b["clusters"]) for b in report["batches"] if b["t"] == 600.0]
    assert ("Partition 4 - 6", "1.29.15-gke.7000", ["c-006"]) in at_10m
    assert ("Partition 4 - 6", "1.33.19-gke.5000", ["c-005"]) in at_10m
    assert ("Partition 6 - 8", "1.33.19-gke.5000", ["c-008"]) in at_10m
    succeeded = {e["cluster"] for e in report["clusterEvents"] if e["t"] == 600.0 and e["event"] == "succeeded"}
    assert "c-008" in succeeded
    case = load_checker().Case(path, yaml.safe_load(path.read_text()), report)
    case.run()
    assert case.errors == []
