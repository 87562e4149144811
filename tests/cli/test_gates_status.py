"""`rollout status` and `rollout watch` on stage gates: which approval gate waits and since when, who
approved it when and why (CHK-1, STAT-5), and when a stage's start window opens (CHK-3)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from check_status_doc import halted_by_a_check
from rich.console import Console

from rollout_cli.dashboard import status_view
from rollout_cli.demo_simulation import status_document
from rollout_cli.main import main
from rollout_cli.progress_model import ProgressModel
from rollout_common.commands import WakeAt
from rollout_planner.simulation.runner import Simulator
from rollout_planner.simulation.scenario import load_scenario

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
APPROVALS = SCENARIOS / "chk1-approval-before-and-after.yaml"
WINDOW = SCENARIOS / "chk3-weekly-start-window.yaml"
_BOX = "│╭╮╰╯─ "


def _lines(screen: str) -> list[str]:
    """The screen's lines without the panel's border, spaces collapsed: what a person reads."""
    return [" ".join(line.strip(_BOX).split()) for line in screen.splitlines()]


def _status_at(capsys: pytest.CaptureFixture[str], scenario: Path, at: str) -> list[str]:
    assert main(["demo", "--scenario", str(scenario), "--status-at", at, "--no-dashboard"]) == 0
    return _lines(capsys.readouterr().out)


def test_chk_1_status_names_the_waiting_before_gate_and_since_when(capsys: pytest.CaptureFixture[str]) -> None:
    """STAT-5: prod/controlPlane reached the before gate at 1d10m (2026-01-06 00:10); at 1d20m it has
    waited 10m and nobody approved it (the approval in advance at 1d was rejected)."""
    lines = _status_at(capsys, APPROVALS, "1d20m")
    assert "prod controlPlane AWAITING_APPROVAL 1.31.13-gke.1023000 PENDING 2" in lines
    assert "approval gate rollout waiting since approval" in lines
    assert "prod before main-1 2026-01-06 00:10 UTC not approved yet, waiting 10m" in lines
    assert "prod/controlPlane CHK-1 rollout main-1 waits for the before approval of stage prod, waiting since" in lines


def test_chk_1_status_says_who_approved_when_and_why_beside_the_after_gate_waiting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """OPS-3, STAT-5: alice approved the before gate at 2d with comment CAB-42 (bob's second approval at
    2d1h changed nothing); the after gate waits since prod/controlPlane's soak ended at 3d10m."""
    lines = _status_at(capsys, APPROVALS, "3d20m")
    gate_rows = [line for line in lines if line.startswith("prod before") or line.startswith("prod after")]
    assert gate_rows == [
        "prod before main-1 2026-01-06 00:10 UTC approved by alice at 2026-01-07 00:00 UTC: CAB-42",
        "prod after main-1 2026-01-08 00:10 UTC not approved yet, waiting 10m",
    ]


def test_chk_1_status_of_a_stage_without_gates_has_no_gate_table(capsys: pytest.CaptureFixture[str]) -> None:
    lines = _status_at(capsys, WINDOW, "2h")
    assert "approval gate rollout waiting since approval" not in lines


def test_chk_3_status_says_when_the_start_window_opens_and_wakes_then(capsys: pytest.CaptureFixture[str]) -> None:
    """CHK-3, STAT-5: the version reached prod on Monday; both tracks wait PENDING for Tuesday's
    09:00 window, which is also the planner's next wake-up."""
    screen = " ".join(_status_at(capsys, WINDOW, "2h"))
    for track in ("controlPlane", "nodes"):
        assert (
            f"prod/{track} CHK-3 rollout main-1 waits for the start window of stage prod (CHK-3) "
            "until 2026-01-06 09:00 UTC (in 1d7h)"
        ) in screen
    assert (
        "next wake-up: 2026-01-06 09:00 UTC (in 1d7h), when the start window of prod/controlPlane opens "
        "(CHK-3, rollout main-1)"
    ) in screen


def test_chk_3_status_as_json_carries_the_window_wait_with_its_opening() -> None:
    sim = _simulated(WINDOW, until=2 * 3600)
    prod = next(s for s in status_document(sim)["stages"] if s["name"] == "prod")
    opens = 1_767_690_000.0  # 2026-01-06 09:00 UTC
    assert prod["tracks"]["nodes"]["waits"] == [
        {
            "rule": "CHK-3",
            "message": "rollout main-1 waits for the start window of stage prod (CHK-3)",
            "partition": None,
            "numbers": {"rollout": "main-1", "opensAt": opens},
            "clusters": [],
            "until": opens,
        }
    ]


def _simulated(scenario: Path, *, until: float, model: ProgressModel | None = None) -> Simulator:
    """The scenario run to `until` seconds after its start; `model` takes each progress event at the
    instant it was emitted, as `rollout watch` would."""
    sim = Simulator(load_scenario(scenario))
    sim.start()
    seen = len(sim.report.commands)
    if model is not None:
        model.doc["now"] = sim.origin
    while (t := sim.next_time()) is not None and t <= until:
        sim.step()
        for command in sim.report.commands[seen:]:
            if model is not None and not isinstance(command, WakeAt):
                model.apply(command.model_dump(mode="json", by_alias=True), at=sim.state.now)
        seen = len(sim.report.commands)
    return sim


def _watched(scenario: Path, *, until: float) -> list[str]:
    model = ProgressModel(None, now=0.0)
    _simulated(scenario, until=until, model=model)
    console = Console(file=io.StringIO(), width=160)
    console.print(status_view(model.doc, clock=model.doc["now"], title="watch"))
    return _lines(console.file.getvalue())  # type: ignore[attr-defined]


def test_chk_1_watch_rebuilds_the_gates_from_transitions_alone() -> None:
    """CHK-1 on `rollout watch` without a stored status: the gates, since when, who approved when, read
    from the progress events as they came (bob's second approval, ALREADY_APPROVED, changes nothing)."""
    lines = _watched(APPROVALS, until=3 * 86400 + 40 * 60)
    gate_rows = [line for line in lines if line.startswith("prod before") or line.startswith("prod after")]
    # the stream says who approved the before gate (its acknowledgement), not the comment
    assert gate_rows == [
        "prod before main-1 2026-01-06 00:10 UTC approved by alice at 2026-01-07 00:00 UTC",
        "prod after main-1 2026-01-08 00:10 UTC not approved yet, waiting 30m",
    ]
    assert (
        "prod/controlPlane CHK-1 rollout main-1: soak ended; the version is qualified downstream once approved: "
        "the after approval of stage prod, waiting since 2026-01-08T00:10:00+00:00 (CHK-1)"
    ) in " ".join(lines)


def test_chk_3_watch_shows_when_the_start_window_opens() -> None:
    """CHK-3 on `rollout watch`: the nodes went PENDING at 1h40m (its last event), waiting for Tuesday 09:00."""
    screen = " ".join(_watched(WINDOW, until=2 * 3600))
    assert (
        "prod/nodes CHK-3 rollout main-1: the version reached the stage; it starts when the stage's start window "
        "opens: the window opens at 2026-01-06T09:00:00+00:00 (CHK-3) until 2026-01-06 09:00 UTC (in 1d7h20m)"
    ) in screen


def test_chk_1_approve_help_says_what_each_exit_code_means_for_an_approval(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """OPS-3: `rollout approve` waits for the acknowledgement; its help says what 0, 1 and 4 mean for it."""
    with pytest.raises(SystemExit) as exited:
        main(["approve", "--help"])
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert (
        "Exit 0: accepted, including an approval of a gate already open (ALREADY_APPROVED). Exit 1: rejected, "
        "with the planner's reason: an unknown rollout or stage, a stage without that gate, or a gate that is "
        "not waiting (not reached yet, or its rollout cancelled). Exit 4: no answer within --timeout; the "
        "approval may still be applied, so look with `rollout status` first (repeating it is harmless)."
    ) in text
    assert "The command waits for the planner's acknowledgement on the progress topic" in text


def test_chk_4_status_names_the_clusters_a_budget_holds_and_when_it_ends(capsys: pytest.CaptureFixture[str]) -> None:
    """CHK-4, STAT-5: p-01's control plane was upgraded 12h before the start (patch: 24h), p-02's 4 days
    before (minor: 30d); both wait PAUSED DISRUPTION_BUDGET, named as a budget, not as a closed window,
    and the planner next wakes when p-01's budget ends at 12h."""
    lines = _status_at(capsys, SCENARIOS / "chk4-patch-and-minor-intervals.yaml", "1h")
    assert "prod controlPlane IN_PROGRESS 1.31.13-gke.1023000 running 1h COMPLETE 1 PAUSED 2" in lines
    assert (
        "PAUSED DISRUPTION_BUDGET 2 cluster track(s): p-01, p-02; the first budget ends 2026-01-05 12:00 UTC (in 11h)"
    ) in lines
    assert (
        "next wake-up: 2026-01-05 12:00 UTC (in 11h), when the disruption budget of p-01 (controlPlane) ends (CHK-4)"
    ) in lines
    assert not [line for line in lines if "MAINTENANCE_POLICY" in line]


def test_stat_2_a_halted_track_says_why_beside_how_long_it_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """STAT-2, STAT-5: the second failed upgrade at 10m halts prod's control planes (maxFailures 2); the
    track's timing names the reason (a check's halt, CHECK_FAILED, reads the same way)."""
    lines = _status_at(capsys, SCENARIOS / "gate6-max-failures.yaml", "2h")
    assert "prod controlPlane PAUSED 1.31.13-gke.1023000 paused (FAILURE_BUDGET), running 2h PAUSED 4 FAILED 2" in lines


def test_chk_2_status_shows_each_checks_latest_value_against_its_condition_and_why_it_halted() -> None:
    """CHK-2, STAT-5: error-rate's 0.07 failed its condition twice in a row (limit 1), so the control
    planes halted PAUSED with CHECK_FAILED; p99-latency passed; saturation has no result yet."""
    doc = halted_by_a_check()
    console = Console(file=io.StringIO(), width=200)
    console.print(status_view(doc, clock=float(doc["now"]), title="status"))
    lines = _lines(console.file.getvalue())  # type: ignore[attr-defined]
    rows = [line for line in lines if line.startswith("prod ") and " main-1 " in line]
    assert rows == [
        "prod error-rate main-1 failed with 0.07 at 2026-01-01 00:05 UTC passes when result < 0.01, fails when "
        "result > 0.05 failed 2 in a row (limit 1), inconclusive 0 (limit 2)",
        "prod p99-latency main-1 passed with 0.25 at 2026-01-01 00:05 UTC passes when result < 0.5 failed 0 in a "
        "row (limit 1), inconclusive 0 (limit 2)",
        "prod saturation main-1 no result since 2026-01-01 00:00 UTC passes when result < 0.01 failed 0 in a row "
        "(limit 1), inconclusive 0 (limit 2)",
    ]
    assert "metric check rollout latest result condition in a row" in lines
    halted = "prod controlPlane PAUSED 1.31.13-gke.1023000 paused (CHECK_FAILED), running 10m"
    assert any(line.startswith(halted) for line in lines)


def test_chk_2_status_reads_the_check_views_the_engine_writes(capsys: pytest.CaptureFixture[str]) -> None:
    """CHK-2, STAT-5: the status screen's check table is fed by the engine's own stage view, not a
    hand-made document: at 1h30m the errors check failed twice in a row (0.05 at 1h10m, limit 1)."""
    scenario = SCENARIOS / "chk2-check-failed-halts-then-resume-soaks-again.yaml"
    lines = _status_at(capsys, scenario, "1h30m")
    at = lines.index("metric check rollout latest result condition in a row")
    assert lines[at + 2 : at + 4] == [
        "prod errors main-1 failed with 0.05 at 2026-01-05 passes when result < 0.01 failed 2 in a row (limit 1),",
        "01:10 UTC inconclusive 0 (limit 2)",
    ]


def test_chk_2_stat_5_a_track_a_check_halted_says_so_and_no_wake_up_promises_a_forced_soak(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """CHK-2: both tracks of prod are PAUSED with CHECK_FAILED at 1h30m. The waits say why and what
    ends it (a resume), instead of "Nothing is waiting"; the 30-day deadline wakes nothing for a
    halted run, so no next wake-up says it will soak anyway."""
    scenario = SCENARIOS / "chk2-check-failed-halts-then-resume-soaks-again.yaml"
    lines = _status_at(capsys, scenario, "1h30m")
    assert "Nothing is waiting on a gate right now." not in lines
    at = lines.index("waiting: stage/track rule why")
    assert lines[at + 2 : at + 5] == [
        "prod/controlPlane CHK-2 halted (CHECK_FAILED): errors failed with 0.05, passes when result < 0.01; running",
        "upgrades finish, nothing more is handed out or qualified until the rollout is resumed",
        "(OPS-1)",
    ]
    assert not [line for line in lines if line.startswith("next wake-up")]


def test_chk_2_watch_takes_the_checks_latest_values_from_the_stored_status() -> None:
    """CHK-2 on `rollout watch`: check results do not travel on the progress topic, so the screen
    built from progress events alone has no check table; the stored status the watch reads every
    few seconds brings each check's latest value against its condition."""
    scenario = SCENARIOS / "chk2-check-failed-halts-then-resume-soaks-again.yaml"
    model = ProgressModel(None, now=0.0)
    sim = _simulated(scenario, until=90 * 60, model=model)
    assert not [line for line in _screen(model) if line.startswith("prod errors")]
    model.take_checks(status_document(sim))
    lines = _screen(model)
    at = lines.index("metric check rollout latest result condition in a row")
    assert lines[at + 2] == (
        "prod errors main-1 failed with 0.05 at 2026-01-05 01:10 UTC passes when result < 0.01 failed 2 in a row "
        "(limit 1), inconclusive 0 (limit 2)"
    )


def _screen(model: ProgressModel) -> list[str]:
    console = Console(file=io.StringIO(), width=200)
    console.print(status_view(model.doc, clock=model.doc["now"], title="watch"))
    return _lines(console.file.getvalue())  # type: ignore[attr-defined]
