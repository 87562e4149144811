"""`rollout validate`, `plan` and `simulate` on real files: exit codes, messages naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rollout_cli.main import main
from rollout_planner.simulation.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "conformance" / "cases"
SCENARIOS = sorted(SHARED.glob("*.yaml")) + sorted((ROOT / "tests" / "scenarios").glob("*.yaml"))

BAD = """
clusters:
  - {name: a-1, labels: {env: a}, version: 1.30.5}
  - {name: "bad name!", version: 1.30}
sequence:
  stages:
    - {name: a, clusterSelector: {matchLabels: {env: a}}, soak: 40d,
       rolloutStrategy: {maxUnavailable: "10", maxNew: 0, autoPartitionSize: "0%"}}
"""


def test_validate_lists_every_problem_naming_its_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"{path}: 6 problem(s)"
    assert err[1:] == [
        "  - clusters.1.name: 'bad name!' is not a valid cluster name (letters, digits, '.', '_', '-')",
        '  - clusters.1.version: version 1.3 was read as a number; quote it, e.g. "1.30" or "1.30.5"',
        "  - sequence.stages.0.soak: soak: soak must be between 0d and 30d inclusive (SOAK-3), got '40d'",
        "  - sequence.stages.0.rolloutStrategy.maxUnavailable: maxUnavailable: '10' is neither a count "
        "(integer >= 0) nor a percentage like '10%'",
        "  - sequence.stages.0.rolloutStrategy.autoPartitionSize: autoPartitionSize resolves to 0 clusters "
        "per partition",
        "  - sequence.stages.0.rolloutStrategy.maxNew: Input should be greater than or equal to 1",
    ]


def test_validate_seq_2_cluster_in_two_stages_is_a_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "two.yaml"
    path.write_text(
        "clusters: [{name: c1, labels: {env: a, tier: b}, version: 1.30.5}]\n"
        "sequence: {stages: [{name: a, clusterSelector: {matchLabels: {env: a}}},"
        " {name: b, clusterSelector: {matchLabels: {tier: b}}}]}\n"
    )
    assert main(["validate", str(path)]) == 1
    assert "  - clusters.c1: selected by stages a, b; a cluster belongs to at most one stage (SEQ-2)" in (
        capsys.readouterr().err.splitlines()
    )


def test_validate_missing_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tmp_path / "nope.yaml")]) == 1
    err = capsys.readouterr().err
    assert "cannot read" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("\t", "line 1, column 1: found character '\\t' that cannot start any token"),
        ("a: [1, 2\nb: 3\n", "line 2, column 2: expected ',' or ']', but got ':'"),
    ],
)
def test_validate_bad_yaml_is_one_problem_with_its_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, problem: str
) -> None:
    """The parser's own text runs over several lines and quotes the line, which can be blank."""
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert main(["validate", str(path)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"{path}: 1 problem(s)",
        f"  - {path}: not valid YAML: {problem}",
    ]


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_plan_works_on_every_scenario(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(path), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in plan["stages"]]
    for stage in plan["stages"]:
        for part in stage["partitions"]:
            assert 0 <= part["maxUnavailable"] <= len(part["clusters"])
    # every cluster of the fleet (none for a fleet-less scenario the generator shrank to)
    assert len(plan["eligibility"]) == len(load_scenario(path).fleet())
    assert all("controlPlane" in e for e in plan["eligibility"].values())


def test_plan_gate_4_warns_and_shows_stage_times(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(SHARED / "gke-bank-soak.yaml"), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert any("maxUnavailable is 100%" in w and "GATE-4" in w for w in plan["warnings"])
    testing = plan["stages"][0]["timeline"]["controlPlane"]
    # SOAK-3: 14 days of soak after a 10-minute upgrade
    assert testing == {
        "earliestStart": "2026-01-01T00:00:00+00:00",
        "firstUpgrade": "2026-01-01T00:00:00+00:00",
        "earliestFinish": "2026-01-15T00:10:00+00:00",
        "stuck": None,
    }


def test_simulate_prints_a_timeline(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(SHARED / "gke-empty-first-stage.yaml")]) == 0
    out = capsys.readouterr().out
    assert "x/controlPlane: STUCK" in out
    assert "first stage has no clusters" in out


def test_simulate_engine_error_is_one_line_naming_event_time_and_rule(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Item 5 of the engine issue: an engine error in `rollout simulate` is one line, exit 1."""
    from rollout_planner.engine import decide as real_decide
    from rollout_planner.engine.errors import EngineInvariantError
    from rollout_planner.simulation import runner
    from rollout_planner.simulation.scenario import DEFAULT_START

    def breaking(state: Any, event: Any, now: float) -> Any:
        if now >= runner.to_epoch(DEFAULT_START) + 300:
            raise EngineInvariantError(rule="SEQ-6a", cluster="a-1", stage="a", message="broken on purpose")
        return real_decide(state, event, now)

    monkeypatch.setattr(runner, "decide", breaking)
    assert main(["simulate", str(ROOT / "tests" / "scenarios" / "seq6a-relabel-during-upgrade.yaml")]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "error: engine error at t=300s applying inventory, readiness (SEQ-6a): "
        "SEQ-6a: broken on purpose (cluster a-1, stage a)"
    ]


def test_chk_plan_prints_every_gate_of_a_stage_under_its_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """CHK-1..4 together: an approval before, a weekly start window, the sequence's disruption budget
    and a metric check each print as one line naming the stage, in that order, under the stage table."""
    scenario = tmp_path / "all-gates.yaml"
    scenario.write_text(_ALL_GATES)
    assert main(["plan", str(scenario)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("prod: ")]
    assert lines == [
        "prod: approval before",
        "prod: start window from 2026-01-06T09:00:00Z for 8h, FREQ=WEEKLY;BYDAY=TU",
        "prod: disruption budget: a cluster's upgrades at least patch 1d / minor 30d apart",
        "prod: check errors: error_ratio passes when result < 0.01, every 10m while progress and soak "
        "(failureLimit 1, inconclusiveLimit 2)",
    ]


_ALL_GATES = """
name: all-gates
start: "2026-01-05T00:00:00Z"
clusters:
  - {name: prod-01, labels: {env: prod}, version: 1.30.5-gke.1000}
sequence:
  name: main
  channel: regular
  minUpgradeInterval: {patch: 24h, minor: 30d}
  stages:
    - name: prod
      clusterSelector: {matchLabels: {env: prod}}
      soak: 1h
      approval: {before: true}
      startWindow: {start: "2026-01-06T09:00:00Z", duration: 8h, recurrence: "FREQ=WEEKLY;BYDAY=TU"}
      checks:
        - {name: errors, query: error_ratio, successCondition: "result < 0.01", interval: 10m, failureLimit: 1}
simulation:
  upgradeDuration: {controlPlane: 10m, nodes: 30m}
  readyAfter: 1m
  metrics:
    - {query: error_ratio, from: 0s, until: 30d, value: 0.002}
events:
  - {at: 0s, releaseTarget: {channel: regular, targets: {"1.30": "1.31.13-gke.1023000"}}}
  - {at: 2d, command: {approve: {stage: prod, gate: before}}}
until: 10d
"""
