"""Generator findings that the shared checker cannot judge alone, kept with their expectations.

`findings/bus3-failed-cluster-once-per-batch-after-re-release.yaml` re-releases, after a cancel, the
versions the cancelled rollouts had offered; `check.py` attributes every later batch of those
versions to the cancelled rollouts (OPS-1), so the file lives here rather than in tests/scenarios,
and this test accepts exactly that one line besides its own expectations.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import yaml

from rollout_planner.simulation.runner import Simulator
from rollout_planner.simulation.scenario import load_scenario

HERE = Path(__file__).resolve().parent
CHECK_PY = HERE.parents[2] / "shared" / "conformance" / "check.py"


def _checker():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("shared_conformance_check_findings", CHECK_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_bus_3_a_failed_cluster_is_handed_out_once_per_batch_after_a_re_release() -> None:
    path = HERE / "findings" / "bus3-failed-cluster-once-per-batch-after-re-release.yaml"
    report = Simulator(load_scenario(path)).run().as_json()
    for batch in report["batches"]:
        assert len(set(batch["clusters"])) == len(batch["clusters"]), batch
    case = _checker().Case(path, yaml.safe_load(path.read_text()), report)
    case.run()
    assert case.errors == ["OPS-1: batch at t=176922.0 after cancel"]
