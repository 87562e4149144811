"""CHK-2 metric checks in the engine: series announced on entering a guarded phase, progress checks
gating batches (passed and fresh), soak checks holding a soak's end, halts with CHECK_FAILED /
CHECK_INCONCLUSIVE past the limits, resume (OPS-1) with fresh counts and a whole soak again, BUS-7
for results, and snapshots keeping it all."""

from __future__ import annotations

from typing import Any

from enginekit import (
    CP,
    DAY,
    HOUR,
    MIN,
    NODES,
    T0,
    V31,
    Driver,
    advances,
    cluster,
    sequence,
    stage,
    transitions,
    wait_for,
)

from rollout_common.check_results import CheckResult
from rollout_common.commands import CheckSeries, Command, StageTransition
from rollout_common.events import SequenceChange
from rollout_common.status import StageState
from rollout_planner.engine import views
from rollout_planner.engine.runs import allowed
from rollout_planner.engine.snapshot import dump, load

PROD = ["prod-1", "prod-2"]
TEXT = "successCondition result < 0.01"


def _check(**fields: Any) -> dict[str, Any]:
    return {"name": "errors", "query": "error_ratio", "successCondition": "result < 0.01", "interval": "5m", **fields}


def _driver(*, soak: str = "1h", max_new: int = 2, **check: Any) -> Driver:
    prod = stage("prod", soak=soak, rolloutStrategy={"maxNew": max_new, "maxUnavailable": 1}, checks=[_check(**check)])
    return Driver(sequence(prod), [cluster(n) for n in PROD])


def _result(d: Driver, outcome: str, *, at: float, value: float | None = 0.002) -> list[Command]:
    event = CheckResult(
        rollout_id="main-1",
        stage="prod",
        check="errors",
        observed_at=T0 + at,
        value=None if outcome == "inconclusive" else value,
        outcome=outcome,
        reason="no sample" if outcome == "inconclusive" else f"{value} against result < 0.01",
    )
    return d.send(event, at=at)


def _series(commands: list[Command]) -> list[tuple[str, bool, float]]:
    return [(c.check, c.running, c.since - T0) for c in commands if isinstance(c, CheckSeries)]


def _said(commands: list[Command]) -> list[tuple[str, str, str]]:
    return [(c.track.value, c.state.value, c.reason) for c in commands if isinstance(c, StageTransition)]


def _soaking(d: Driver) -> list[Command]:
    """Both tracks through prod with passed checks: soaking from 40m (control planes 10m, nodes 40m)."""
    out = d.release({"1.30": V31})
    out += _result(d, "passed", at=0)
    out += d.finish(PROD, CP, at=10 * MIN, ready=True)
    out += _result(d, "passed", at=10 * MIN)
    out += d.finish(PROD, NODES, at=40 * MIN, ready=True)
    return out


def test_chk_2_run_state_machine_table_lets_a_check_halt_a_soak_and_a_resume_soak_again() -> None:
    """STAT-2: a check halts SOAKING and FORCED_SOAKING runs (PAUSED); the resume soaks again."""
    for soaking in (StageState.SOAKING, StageState.FORCED_SOAKING):
        assert allowed(soaking, StageState.PAUSED)
        assert allowed(StageState.PAUSED, soaking)


def test_chk_2_series_starts_on_entering_progress_and_the_first_batch_waits_for_a_pass() -> None:
    d = _driver(phases=["progress"])
    out = d.release({"1.30": V31})
    assert transitions(out) == [("prod", "controlPlane", "IN_PROGRESS", V31), ("prod", "nodes", "IN_PROGRESS", V31)]
    # one series per check, however many tracks enter the phase: evaluated at once, every 5 minutes
    assert [c for c in out if isinstance(c, CheckSeries)] == [
        CheckSeries(rollout_id="main-1", stage="prod", check="errors", running=True, since=T0, interval=300.0)
    ]
    assert advances(out) == []
    # the batch was held in the same instant the series began: no result yet
    assert [n["text"] for _, n in wait_for(out, CP, "CHK-2")] == [f"check errors: no result yet ({TEXT})"]
    out = _result(d, "passed", at=0)
    assert advances(out) == [("prod", "controlPlane", V31, ["prod-1", "prod-2"])]


def test_chk_2_progress_result_two_intervals_old_holds_the_next_batch_until_a_fresh_pass() -> None:
    d = _driver(max_new=1, phases=["progress"])
    d.release({"1.30": V31})
    assert advances(_result(d, "passed", at=0)) == [("prod", "controlPlane", V31, ["prod-1"])]
    # prod-1 ready at 10m: the pass of 0s is 10 minutes (two intervals) old, no longer fresh
    out = d.finish(["prod-1"], CP, at=10 * MIN, ready=True)
    assert advances(out) == []
    assert [n["text"] for _, n in wait_for(out, CP, "CHK-2")] == [
        f"check errors: passed with 0.002 at 2026-01-01T00:00:00+00:00 ({TEXT})"
    ]
    out = _result(d, "passed", at=10 * MIN)
    assert advances(out) == [("prod", "nodes", V31, ["prod-1"])]


def test_chk_2_failed_within_the_limit_holds_batches_and_a_pass_lets_them_go() -> None:
    d = _driver(max_new=1, failureLimit=3, phases=["progress"])
    d.release({"1.30": V31})
    _result(d, "passed", at=0)
    assert advances(_result(d, "failed", at=5 * MIN, value=0.05)) == []
    out = d.finish(["prod-1"], CP, at=10 * MIN, ready=True)
    assert advances(out) == []
    assert [n["outcome"] for _, n in wait_for(out, CP, "CHK-2")] == ["failed"]
    assert advances(_result(d, "passed", at=15 * MIN)) == [("prod", "nodes", V31, ["prod-1"])]


def test_chk_2_bus_7_an_older_result_or_one_from_before_the_series_changes_nothing() -> None:
    d = _driver(phases=["progress"])
    d.release({"1.30": V31}, at=10 * MIN)
    assert _result(d, "passed", at=9 * MIN) == []  # observed before the series started at 10m
    _result(d, "failed", at=12 * MIN, value=0.05)  # failureLimit 0: halts
    before = [(r.state, r.reason) for r in d.state.stages[0].runs[0].values()]
    assert _result(d, "passed", at=11 * MIN) == []  # older than the newest applied
    assert [(r.state, r.reason) for r in d.state.stages[0].runs[0].values()] == before


def test_chk_2_failures_beyond_failure_limit_halt_the_stage_with_check_failed_naming_check_value_condition() -> None:
    d = _driver(max_new=1, failureLimit=1)
    d.release({"1.30": V31})
    _result(d, "passed", at=0)
    assert _said(_result(d, "failed", at=5 * MIN, value=0.05)) == []  # one failure is tolerated
    out = _result(d, "failed", at=10 * MIN, value=0.07)
    reason = (
        "halted by a failing metric check: check errors: failed with 0.07 at 2026-01-01T00:10:00+00:00 "
        f"({TEXT}); 2 failed in a row, failureLimit 1 (CHK-2)"
    )
    assert _said(out) == [("controlPlane", "PAUSED", reason), ("nodes", "PAUSED", reason)]
    assert _series(out) == [("errors", False, 0.0)]  # no track is in a guarded phase any more
    # the running upgrade finishes; nothing more is handed out there, nothing soaks or qualifies
    out = d.finish(["prod-1"], CP, at=12 * MIN, ready=True)
    assert advances(out) == [] and transitions(out) == []
    assert d.state.stages[0].waits[0] == [("OPS-1", "All", {"reason": "CHECK_FAILED"})]
    [said] = views.stage_view(d.state, d.state.stage_by_name["prod"])["tracks"]["controlPlane"]["waits"]
    assert said["message"] == (
        "halted by a metric check (CHECK_FAILED); no new batches, nothing qualified until the rollout is resumed "
        "(CHK-2, OPS-1)"
    )
    assert d.wake(at=31 * DAY) == []  # the 30-day clock does not force a halted stage to soak


def test_chk_2_inconclusive_beyond_its_limit_halts_with_check_inconclusive() -> None:
    d = _driver(inconclusiveLimit=1)
    d.release({"1.30": V31})
    assert _said(_result(d, "inconclusive", at=0)) == []
    out = _result(d, "inconclusive", at=5 * MIN)
    reason = (
        "halted by a metric check without a conclusive result: check errors: inconclusive with no value at "
        f"2026-01-01T00:05:00+00:00 ({TEXT}): no sample; 2 inconclusive in a row, inconclusiveLimit 1 (CHK-2)"
    )
    assert _said(out) == [("controlPlane", "PAUSED", reason), ("nodes", "PAUSED", reason)]
    assert [s.value for s in (r.state for r in d.state.stages[0].runs[0].values())] == ["PAUSED"]


def test_chk_2_a_passed_result_between_failures_starts_the_row_again() -> None:
    d = _driver(failureLimit=1)
    d.release({"1.30": V31})
    _result(d, "failed", at=0, value=0.05)
    _result(d, "passed", at=5 * MIN)
    assert _said(_result(d, "failed", at=10 * MIN, value=0.05)) == []


def test_chk_2_soak_check_holds_the_soak_past_its_time_until_a_fresh_pass() -> None:
    d = _driver(soak="1h", phases=["soak"])
    out = d.release({"1.30": V31})
    assert _series(out) == []  # a soak check has no series while the stage upgrades
    assert advances(out) == [("prod", "controlPlane", V31, ["prod-1", "prod-2"])]
    d.finish(PROD, CP, at=10 * MIN, ready=True)
    out = d.finish(PROD, NODES, at=40 * MIN, ready=True)
    # both tracks began soaking at 40m (the control planes once the nodes' upgrades ended, SOAK-2)
    assert _series(out) == [("errors", True, 40 * MIN)]
    _result(d, "passed", at=40 * MIN)
    _result(d, "passed", at=95 * MIN)  # a pass of 40m is an hour old at 100m: no longer fresh
    assert _said(d.wake(at=100 * MIN)) == [
        ("controlPlane", "COMPLETE", "soak elapsed; version qualified downstream"),
        ("nodes", "COMPLETE", "soak elapsed; version qualified downstream"),
    ]


def test_chk_2_soak_held_by_a_check_without_a_fresh_pass_then_completes_when_one_comes() -> None:
    d = _driver(soak="1h", phases=["soak"], inconclusiveLimit=5)
    d.release({"1.30": V31})
    d.finish(PROD, CP, at=10 * MIN, ready=True)
    d.finish(PROD, NODES, at=40 * MIN, ready=True)
    _result(d, "passed", at=40 * MIN)
    _result(d, "inconclusive", at=95 * MIN)
    out = d.wake(at=100 * MIN)  # the soak time has elapsed; the latest result is no pass
    held = (
        "held by a metric check: the soak time has elapsed; it ends once check errors: inconclusive with no "
        f"value at 2026-01-01T01:35:00+00:00 ({TEXT}) passes (CHK-2)"
    )
    assert _said(out) == [("controlPlane", "SOAKING", held), ("nodes", "SOAKING", held)]
    assert [n["check"] for _, n in wait_for(out, CP, "CHK-2")] == ["errors"]
    assert _said(d.wake(at=101 * MIN)) == []  # still held, said once
    out = _result(d, "passed", at=105 * MIN)
    assert _said(out) == [
        ("controlPlane", "COMPLETE", "soak elapsed; version qualified downstream"),
        ("nodes", "COMPLETE", "soak elapsed; version qualified downstream"),
    ]


def test_chk_2_halt_mid_soak_then_resume_soaks_the_whole_soak_again_with_fresh_counts() -> None:
    d = _driver(soak="1h", failureLimit=1)
    _soaking(d)
    _result(d, "failed", at=45 * MIN, value=0.05)
    out = _result(d, "failed", at=50 * MIN, value=0.05)
    assert [s[:2] for s in _said(out)] == [("controlPlane", "PAUSED"), ("nodes", "PAUSED")]
    assert _said(d.wake(at=101 * MIN)) == []  # the old soak end passes: nothing completes
    out = d.command("resume", at=2 * 60 * MIN)
    assert _said(out) == [
        ("controlPlane", "SOAKING", "resumed: the whole soak time again (CHK-2)"),
        ("nodes", "SOAKING", "resumed: the whole soak time again (CHK-2)"),
    ]
    assert [(c.state.value, c.until) for c in out if isinstance(c, StageTransition)] == [
        ("SOAKING", T0 + 3 * 60 * MIN),
        ("SOAKING", T0 + 3 * 60 * MIN),
    ]
    assert _series(out) == [("errors", True, 120 * MIN)]
    # fresh counts: one failure is tolerated again
    assert _said(_result(d, "failed", at=125 * MIN, value=0.05)) == []
    _result(d, "passed", at=130 * MIN)
    _result(d, "passed", at=175 * MIN)
    out = d.wake(at=180 * MIN)
    assert [s[:2] for s in _said(out)] == [("controlPlane", "COMPLETE"), ("nodes", "COMPLETE")]


def test_chk_2_the_forced_soak_does_not_skip_checks() -> None:
    d = _driver(soak="1h", failureLimit=5)
    d.release({"1.30": V31})
    _result(d, "passed", at=0)
    d.finish(["prod-1"], CP, at=10 * MIN, outcome="failed")
    d.finish(["prod-2"], CP, at=10 * MIN, ready=True)
    out = d.wake(at=30 * DAY)
    assert ("controlPlane", "FORCED_SOAKING") in [s[:2] for s in _said(out)]
    _result(d, "failed", at=30 * DAY, value=0.05)
    out = d.wake(at=30 * DAY + 61 * MIN)
    assert ("controlPlane", "FORCED_SOAKING") in [s[:2] for s in _said(out)]  # held, not COMPLETE
    assert d.state.stages[0].runs[0]["main-1"].state is StageState.FORCED_SOAKING
    out = _result(d, "passed", at=30 * DAY + 62 * MIN)
    assert ("controlPlane", "COMPLETE") in [s[:2] for s in _said(out)]


def test_chk_2_snapshot_restore_mid_soak_keeps_results_and_counts() -> None:
    d = _driver(soak="1h", failureLimit=1)
    _soaking(d)
    _result(d, "failed", at=45 * MIN, value=0.05)
    d.state = load(dump(d.state))
    rec = d.state.checks[("main-1", "prod", "errors")]
    # one series since the progress phase began, its interval, the failure in a row
    assert (rec.since, rec.interval, rec.failed, rec.value) == (T0, 300.0, 1, 0.05)
    out = _result(d, "failed", at=50 * MIN, value=0.05)  # the second in a row halts after the restart
    assert [s[:2] for s in _said(out)] == [("controlPlane", "PAUSED"), ("nodes", "PAUSED")]


def test_chk_2_a_sequence_without_checks_announces_no_series() -> None:
    d = Driver(sequence(stage("prod", soak="1h")), [cluster(n) for n in PROD])
    out = d.release({"1.30": V31})
    assert _series(out) == [] and advances(out) == [("prod", "controlPlane", V31, ["prod-1", "prod-2"])]
    assert d.state.checks == {}


def test_chk_2_stat_5_the_stage_view_shows_each_check_value_condition_and_counts() -> None:
    d = _driver(failureLimit=3)
    d.release({"1.30": V31})
    _result(d, "failed", at=5 * MIN, value=0.05)
    view = views.stage_view(d.state, d.state.stage_by_name["prod"])
    assert view["checks"] == [
        {
            "rollout": "main-1",
            "check": "errors",
            "running": True,
            "since": T0,
            "outcome": "failed",
            "value": 0.05,
            "observedAt": T0 + 5 * MIN,
            "failedInARow": 1,
            "inconclusiveInARow": 0,
            "successCondition": "result < 0.01",
            "failureCondition": None,
            "interval": 300.0,
            "failureLimit": 3,
            "inconclusiveLimit": 2,
            "text": f"check errors: failed with 0.05 at 2026-01-01T00:05:00+00:00 ({TEXT})",
        }
    ]
    assert [w["rule"] for w in view["tracks"]["controlPlane"]["waits"]] == ["CHK-2"]


def test_chk_2_soak_5_an_empty_stage_is_held_by_its_soak_checks_until_they_pass() -> None:
    """A stage's gates hold it even without clusters: it soaks for no time and passes the version
    through once each soak check has passed fresh."""
    seq = sequence(
        stage("test", soak="0s"),
        stage("canary", checks=[_check(phases=["soak"])]),
        stage("prod", soak="1h"),
    )
    d = Driver(seq, [cluster("test-1"), cluster("prod-1")])
    d.release({"1.30": V31})
    out = d.finish(["test-1"], CP, at=10 * MIN, ready=True)
    passing = "no clusters in this stage; the version passes through: it passes once its soak checks pass (CHK-2)"
    assert [(c.stage, c.track.value, c.state.value, c.reason) for c in out if isinstance(c, StageTransition)][-1] == (
        "canary",
        "controlPlane",
        "SOAKING",
        passing,
    )
    assert [(c.stage, c.check, c.running) for c in out if isinstance(c, CheckSeries)] == [("canary", "errors", True)]
    assert advances(out) == [("test", "nodes", V31, ["test-1"])]  # prod waits for canary's check
    passed = d.send(
        CheckResult(
            rollout_id="main-1",
            stage="canary",
            check="errors",
            observed_at=T0 + 15 * MIN,
            value=0.002,
            outcome="passed",
            reason="0.002",
        ),
        at=15 * MIN,
    )
    assert transitions(passed) == [
        ("canary", "controlPlane", "COMPLETE", V31),
        ("prod", "controlPlane", "IN_PROGRESS", V31),
    ]
    assert advances(passed) == [("prod", "controlPlane", V31, ["prod-1"])]


def test_chk_2_seq_7_a_sequence_change_that_removes_a_check_ends_its_series() -> None:
    d = _driver(phases=["progress"])
    d.release({"1.30": V31})
    plain = sequence(stage("prod", soak="1h", rolloutStrategy={"maxNew": 2, "maxUnavailable": 1}))
    out = d.send(SequenceChange(command_id="seq-1", sequence=plain), at=MIN)
    assert [c for c in out if isinstance(c, CheckSeries)] == [
        CheckSeries(rollout_id="main-1", stage="prod", check="errors", running=False, since=T0, interval=300.0)
    ]
    # without the check nothing holds the batch any more
    assert advances(out) == [("prod", "controlPlane", V31, ["prod-1", "prod-2"])]


def test_chk_2_soak_5_an_empty_stage_halted_by_its_check_is_judged_again_for_no_time_on_resume() -> None:
    seq = sequence(stage("test", soak="0s"), stage("canary", checks=[_check(phases=["soak"])]), stage("prod"))
    d = Driver(seq, [cluster("test-1"), cluster("prod-1")])
    d.release({"1.30": V31}, at=0)
    d.finish(["test-1"], CP, at=10 * MIN, ready=True)
    failed = CheckResult(
        rollout_id="main-1",
        stage="canary",
        check="errors",
        observed_at=T0 + 10 * MIN,
        value=0.05,
        outcome="failed",
        reason="0.05",
    )
    assert [t[2] for t in transitions(d.send(failed, at=10 * MIN)) if t[0] == "canary"] == ["PAUSED"]
    out = d.command("resume", at=HOUR)
    # soaking again for no time (not the stage's 7-day default): held until its check passes anew
    assert [(c.state.value, c.until) for c in out if isinstance(c, StageTransition) and c.stage == "canary"] == [
        ("SOAKING", T0 + HOUR),
        ("SOAKING", T0 + HOUR),
    ]


def test_chk_2_a_track_that_reaches_a_halted_stage_waits_halted_and_the_resume_starts_it() -> None:
    """CHK-2 halts the rollout at the stage: prod's control plane is halted while canary's nodes
    still soak; when they qualify, prod's node track arrives PAUSED with the halt's reason, gets no
    batch and starts no series of the check; the resume starts both tracks (OPS-1)."""
    canary = stage("canary", soak="1h", rolloutStrategy={"maxNew": 1, "maxUnavailable": 1})
    prod = stage("prod", soak="1h", rolloutStrategy={"maxNew": 1, "maxUnavailable": 1}, checks=[_check()])
    d = Driver(sequence(canary, prod), [cluster("canary-1"), *(cluster(n) for n in PROD)])
    d.release({"1.30": V31})
    d.finish(["canary-1"], CP, at=10 * MIN, ready=True)
    out = d.wake(at=70 * MIN)  # canary's control planes soaked: prod's control plane starts
    assert _said(out)[-1] == ("controlPlane", "IN_PROGRESS", "the version reached the stage")
    _result(d, "failed", at=71 * MIN, value=0.05)  # failureLimit 0: the first failure halts
    halt = "halted by a failing metric check: check errors: failed with 0.05 at 2026-01-01T01:11:00+00:00"
    assert [(s[0], s[1], s[2].startswith(halt)) for s in _said(d.history)][-1] == ("controlPlane", "PAUSED", True)
    d.finish(["canary-1"], NODES, at=80 * MIN, ready=True)
    out = d.wake(at=140 * MIN)  # canary's nodes soaked: the node track reaches the halted prod
    assert _said(out)[-1] == (
        "nodes",
        "PAUSED",
        "halted by a failing metric check: the rollout is halted at this stage (CHK-2)",
    )
    assert advances(out) == [] and _series(out) == []
    out = d.command("resume", at=150 * MIN)
    assert [s[:2] for s in _said(out)] == [("controlPlane", "IN_PROGRESS"), ("nodes", "IN_PROGRESS")]
    assert _series(out) == [("errors", True, 150 * MIN)]
