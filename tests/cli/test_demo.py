"""`rollout demo`: the built-in fleet runs to the end and the summary tells a person what happened."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rollout_cli.demo_scenario import scale_fleet
from rollout_cli.main import main

CASES = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "cases"
# one summary row per stage track: "│ controlPlane │ COMPLETE │ ..." (stage name only on the first)
_TRACK_ROW = re.compile(r"│\s*(controlPlane|nodes)\s*│\s*([A-Z_]+)\s*│")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["demo", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _summary(out: str) -> str:
    assert "\nSummary" in out, out[-2000:]
    return out[out.index("\nSummary") :]


def test_builtin_demo_runs_every_stage_to_complete(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "--no-live", "--speed", "0")
    assert code == 0, err
    summary = _summary(out)
    rows = _TRACK_ROW.findall(summary)
    assert len(rows) == 6  # test, staging, prod x controlPlane, nodes
    assert {state for _, state in rows} == {"COMPLETE"}
    assert "COMPLETED" in summary.splitlines()[-1]


def test_builtin_demo_reports_the_failure_and_the_outage(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--no-live", "--speed", "0")
    assert code == 0
    summary = _summary(out)
    failed = next(line for line in summary.splitlines() if "prod-003" in line)
    assert "upgrade failed" in failed
    assert "FAILED" in failed
    assert "scripted failure" in failed
    offline = next(line for line in summary.splitlines() if "stg-canary-2" in line)
    assert "offline" in offline
    # the reason says which gate the outage held: the canary partition held the rest (GATE-3)
    assert "GATE-3" in summary[summary.index("stg-canary-2") :]


def test_log_lines_tell_the_story_in_time_order(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = _run(capsys, "--no-live", "--speed", "0")
    log = out[: out.index("\nSummary")].splitlines()
    assert all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC  T\+\S+", line) for line in log if line)
    text = "\n".join(log)
    expected_order = [
        "test/controlPlane: IN_PROGRESS",
        "stg-canary-2 is not ready (offline)",
        "waiting staging/controlPlane GATE-3",
        "stg-canary-2 is ready",
        "prod/controlPlane: IN_PROGRESS",
        "waiting prod/controlPlane GATE-1",
        "FAILED prod-003 controlPlane",
        "prod/controlPlane: FORCED_SOAKING",
        "rollout demo-1: COMPLETED",
    ]
    positions = [text.index(fragment) for fragment in expected_order]
    assert positions == sorted(positions)


def test_json_summary_and_scaled_fleet(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--json", "--clusters", "60")
    assert code == 0
    summary = json.loads(out)
    assert summary["clusters"] == 60
    assert {t["state"] for s in summary["stages"].values() for t in s.values()} == {"COMPLETE"}
    kinds = {(row["cluster"], row["kind"]) for row in summary["attention"]}
    assert kinds == {("prod-003", "upgrade failed"), ("stg-canary-2", "offline")}


def test_scaling_keeps_the_proportions_and_the_exact_total() -> None:
    raw = {
        "generate": [{"count": 30, "name": "a-{i}"}, {"count": 270, "name": "b-{i}"}],
        "sequence": {"stages": [{"name": "s", "rolloutStrategy": {"autoPartitionThreshold": 100}}]},
    }
    scaled = scale_fleet(raw, clusters=1000)
    assert [g["count"] for g in scaled["generate"]] == [100, 900]
    assert scaled["sequence"]["stages"][0]["rolloutStrategy"]["autoPartitionThreshold"] == 333
    assert raw["generate"][0]["count"] == 30  # the input is left alone


@pytest.mark.skipif(not CASES.is_dir(), reason="the shared conformance cases are not checked out")
def test_any_scenario_file_runs(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "--no-live", "--speed", "0", "--scenario", str(CASES / "gke-bank-soak.yaml"))
    assert code == 0, err
    assert "production/nodes: COMPLETE" in out
    assert {state for _, state in _TRACK_ROW.findall(_summary(out))} == {"COMPLETE"}
    assert "No failed upgrades and no outages." in out


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--scenario", "no/such/file.yaml"], "cannot read"),
        (["--clusters", "5"], "--clusters must be at least"),
        (["--speed", "-1"], "--speed"),
    ],
)
def test_mistakes_give_one_line_and_exit_1(capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str) -> None:
    code, out, err = _run(capsys, "--no-live", *argv)
    assert code == 1  # invalid input (rollout_cli.exit_codes)
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("error: ")
    assert fragment in err


def test_an_invalid_scenario_is_one_line_too(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nsequence: {name: s, stages: [{name: a, soak: 40d}]}\nuntil: soon\n")
    code, _, err = _run(capsys, "--no-live", "--scenario", str(bad))
    assert code == 1
    assert len(err.strip().splitlines()) == 1
    assert "bad.yaml" in err
    assert "until" in err
