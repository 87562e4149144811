"""CHK-1 approval gates: a stage waits AWAITING_APPROVAL before it starts a version and/or after it
soaked it, until an `approve` command opens the gate (OPS-3 acknowledgements, STAT-5 wording)."""

from __future__ import annotations

from enginekit import CP, DAY, MIN, NODES, V31, Driver, acks, advances, cluster, sequence, stage, transitions

from rollout_common.commands import StageTransition
from rollout_common.events import OperatorCommand
from rollout_common.status import StageState
from rollout_planner.engine import views
from rollout_planner.engine.runs import ALLOWED, allowed

TEST = ["test-1", "test-2"]
PROD = ["prod-1", "prod-2"]


def _gated(before: bool = True, after: bool = False, *, soak: str = "1d") -> Driver:
    seq = sequence(
        stage("test", soak=soak),
        stage("prod", soak=soak, approval={"before": before, "after": after}),
    )
    return Driver(seq, [cluster(n) for n in TEST + PROD])


def _through_test(d: Driver) -> list:
    """The release passes the test stage: control planes and nodes upgraded and soaked by 1d40m."""
    out = d.release({"1.30": V31})
    out += d.finish(TEST, CP, at=10 * MIN, ready=True)
    out += d.finish(TEST, NODES, at=40 * MIN, ready=True)
    out += d.wake(at=DAY + 10 * MIN)
    out += d.wake(at=DAY + 40 * MIN)
    return out


def _reasons(commands: list) -> list[tuple[str, str, str]]:
    return [
        (c.track.value, c.state.value, c.reason)
        for c in commands
        if isinstance(c, StageTransition) and c.stage == "prod"
    ]


def test_chk_1_run_state_machine_table_has_awaiting_approval() -> None:
    """STAT-2: AWAITING_APPROVAL is a state of the table: reached from PENDING (before) and from a
    soak (after); it opens into the moves an arrival makes, or COMPLETE."""
    assert allowed(StageState.PENDING, StageState.AWAITING_APPROVAL)
    assert allowed(StageState.SOAKING, StageState.AWAITING_APPROVAL)
    assert allowed(StageState.FORCED_SOAKING, StageState.AWAITING_APPROVAL)
    assert not allowed(StageState.IN_PROGRESS, StageState.AWAITING_APPROVAL)
    assert ALLOWED[StageState.AWAITING_APPROVAL] == frozenset(
        {
            StageState.PENDING,
            StageState.IN_PROGRESS,
            StageState.PAUSED,
            StageState.STUCK,
            StageState.COMPLETE,
            StageState.CANCELLED,
            StageState.AWAITING_APPROVAL,
            StageState.SOAKING,  # CHK-2: an empty stage approved `before` soaks at once for its soak checks
        }
    )


def test_chk_1_before_gate_holds_both_tracks_until_approved_and_starts_the_30_day_clock_then() -> None:
    d = _gated()
    out = _through_test(d)
    assert [t for t in transitions(out) if t[0] == "prod"] == [
        ("prod", "controlPlane", "AWAITING_APPROVAL", V31),
        ("prod", "nodes", "AWAITING_APPROVAL", V31),
    ]
    assert _reasons(out)[0][2] == (
        "the version reached the stage; it starts once approved: the before approval of stage prod, "
        "waiting since 2026-01-02T00:10:00+00:00 (CHK-1)"
    )
    assert [a for a in advances(out) if a[0] == "prod"] == []
    # nothing is targeted before the approval: prod's clusters stay PENDING, no version reached them
    assert views.track_status(d.state, d.state.clusters["prod-1"], 0)[0].value == "PENDING"
    # STAT-5: the stage says which gate waits and since when
    view = views.stage_view(d.state, d.state.stage_by_name["prod"])
    assert view["gates"] == [
        {
            "rollout": "main-1",
            "gate": "before",
            "waitingSince": d.state.gates[("main-1", "prod", "before")].reached_at,
            "approvedAt": None,
            "approvedBy": None,
            "comment": None,
        }
    ]
    assert view["tracks"]["nodes"]["waits"][0]["rule"] == "CHK-1"
    out = d.command("approve", at=2 * DAY, stage="prod", gate="before", issued_by="alice", comment="CAB-42")
    assert acks(out) == [("cmd-1", True, "the before gate of stage prod approved by alice for main-1")]
    assert transitions(out) == [("prod", "controlPlane", "IN_PROGRESS", V31), ("prod", "nodes", "IN_PROGRESS", V31)]
    assert advances(out) == [("prod", "controlPlane", V31, PROD)]
    run = d.state.stage_by_name["prod"].runs[0]["main-1"]
    assert run.started_at == d.now  # SOAK-4's clock starts at IN_PROGRESS, not when the gate was reached
    gate = d.state.gates[("main-1", "prod", "before")]
    assert (gate.approved_at, gate.approved_by, gate.comment) == (d.now, "alice", "CAB-42")


def test_chk_1_approval_in_advance_is_rejected_and_a_second_one_is_already_approved() -> None:
    d = _gated()
    out = d.release({"1.30": V31})
    out += d.command("approve", at=MIN, command_id="early", stage="prod", gate="before", issued_by="bob")
    assert acks(out) == [
        (
            "early",
            False,
            "the before gate of stage prod is not waiting for any active rollout; "
            "a gate is approved only once reached (CHK-1)",
        )
    ]
    _through_test_rest(d)
    d.command("approve", at=2 * DAY, command_id="first", stage="prod", gate="before", issued_by="alice")
    again = d.command("approve", at=2 * DAY + MIN, command_id="again", stage="prod", gate="before", issued_by="carol")
    assert acks(again) == [("again", True, "ALREADY_APPROVED")]
    assert transitions(again) == [] and advances(again) == []
    assert d.state.gates[("main-1", "prod", "before")].approved_by == "alice"


def _through_test_rest(d: Driver) -> None:
    d.finish(TEST, CP, at=10 * MIN, ready=True)
    d.finish(TEST, NODES, at=40 * MIN, ready=True)
    d.wake(at=DAY + 10 * MIN)
    d.wake(at=DAY + 40 * MIN)


def test_chk_1_approve_is_validated_ops_3_ops_5() -> None:
    d = _gated()
    _through_test(d)
    cases = {
        "no-stage": dict(stage="nope", gate="before"),
        "no-gate-here": dict(stage="test", gate="before"),
        "no-after": dict(stage="prod", gate="after"),
        "no-position": dict(stage="prod"),
    }
    got = [acks(d.command("approve", at=DAY + 50 * MIN, command_id=k, **v))[0] for k, v in cases.items()]
    assert got == [
        ("no-stage", False, "unknown stage 'nope'"),
        ("no-gate-here", False, "stage test has no before approval gate (CHK-1)"),
        ("no-after", False, "stage prod has no after approval gate (CHK-1)"),
        ("no-position", False, "approve names its gate: before or after (CHK-1)"),
    ]
    unnamed = d.send(OperatorCommand(command_id="unnamed", action="approve", stage="prod", gate="before"))
    assert acks(unnamed) == [
        ("unnamed", False, "name a rollout (rolloutId) or say it applies to all active rollouts (all: true) (OPS-5)")
    ]
    unknown = d.command(
        "approve", at=DAY + 51 * MIN, command_id="unknown", rollout_id="main-9", stage="prod", gate="before"
    )
    assert acks(unknown) == [("unknown", False, "unknown rollout main-9")]
    named = d.command(
        "approve", at=DAY + 52 * MIN, command_id="named", rollout_id="main-1", stage="prod", gate="before"
    )
    assert acks(named) == [("named", True, "the before gate of stage prod approved by an unnamed approver for main-1")]


def test_chk_1_after_gate_holds_qualification_until_approved() -> None:
    seq = sequence(
        stage("test", soak="1d", approval={"after": True}),
        stage("prod", soak="1d"),
    )
    d = Driver(seq, [cluster(n) for n in TEST + PROD])
    d.release({"1.30": V31})
    d.finish(TEST, CP, at=10 * MIN, ready=True)
    d.finish(TEST, NODES, at=40 * MIN, ready=True)
    out = d.wake(at=DAY + 10 * MIN)
    assert [(c.stage, c.track.value, c.state.value, c.reason) for c in out if isinstance(c, StageTransition)] == [
        (
            "test",
            "controlPlane",
            "AWAITING_APPROVAL",
            "soak ended; the version is qualified downstream once approved: the after approval of stage test, "
            "waiting since 2026-01-02T00:10:00+00:00 (CHK-1)",
        )
    ]
    out = d.wake(at=DAY + 40 * MIN)
    assert transitions(out) == [("test", "nodes", "AWAITING_APPROVAL", V31)]
    out = d.command("approve", at=2 * DAY, stage="test", gate="after", issued_by="pipeline-7")
    assert transitions(out) == [
        ("test", "controlPlane", "COMPLETE", V31),
        ("prod", "controlPlane", "IN_PROGRESS", V31),
        ("test", "nodes", "COMPLETE", V31),
        ("prod", "nodes", "IN_PROGRESS", V31),
    ]
    complete = [c.reason for c in out if isinstance(c, StageTransition) and c.state is StageState.COMPLETE]
    assert complete[0] == (
        "approved: the after approval of stage test given by pipeline-7 at 2026-01-03T00:00:00+00:00 (CHK-1)"
    )
    assert advances(out) == [("prod", "controlPlane", V31, PROD)]


def test_chk_1_track_reaching_an_approved_gate_starts_at_once() -> None:
    """Only the control plane reached prod when the gate was approved; the nodes start on arrival."""
    d = _gated()
    d.release({"1.30": V31})
    d.finish(TEST, CP, at=10 * MIN, ready=True)
    d.finish(TEST, NODES, at=40 * MIN, ready=True)
    d.wake(at=DAY + 10 * MIN)
    out = d.command("approve", at=DAY + 20 * MIN, stage="prod", gate="before", issued_by="alice")
    assert transitions(out) == [("prod", "controlPlane", "IN_PROGRESS", V31)]
    out = d.wake(at=DAY + 40 * MIN)
    assert [t for t in transitions(out) if t[0] == "prod"] == [("prod", "nodes", "IN_PROGRESS", V31)]


def test_chk_1_pause_keeps_the_gate_and_an_approval_while_paused_starts_paused() -> None:
    d = _gated()
    _through_test(d)
    out = d.command("pause", at=DAY + 50 * MIN, command_id="p")
    assert [t for t in transitions(out) if t[0] == "prod"] == []  # still AWAITING_APPROVAL
    out = d.command("approve", at=2 * DAY, command_id="a", stage="prod", gate="before", issued_by="alice")
    assert transitions(out) == [("prod", "controlPlane", "PAUSED", V31), ("prod", "nodes", "PAUSED", V31)]
    assert advances(out) == []
    out = d.command("resume", at=2 * DAY + MIN, command_id="r")
    assert advances(out) == [("prod", "controlPlane", V31, PROD)]


def test_chk_1_cancel_discards_the_gate() -> None:
    d = _gated()
    _through_test(d)
    out = d.command("cancel", at=DAY + 50 * MIN, command_id="c")
    assert ("prod", "controlPlane", "CANCELLED", V31) in transitions(out)
    out = d.command("approve", at=2 * DAY, command_id="late", rollout_id="main-1", stage="prod", gate="before")
    assert acks(out) == [("late", False, "rollout main-1 is CANCELLED")]


def test_chk_1_empty_stage_passes_through_once_its_gates_are_open() -> None:
    """A stage's gates hold it even with no clusters (SOAK-5 passes the version through after)."""
    seq = sequence(
        stage("test", soak="0d"),
        stage("empty", soak="0d", approval={"before": True, "after": True}),
        stage("prod", soak="0d"),
    )
    d = Driver(seq, [cluster(n) for n in TEST + PROD])
    d.release({"1.30": V31}, at=0.0)
    out = d.finish(TEST, CP, at=10 * MIN, ready=True)
    assert [t for t in transitions(out) if t[0] == "empty"] == [("empty", "controlPlane", "AWAITING_APPROVAL", V31)]
    out = d.command("approve", at=HOUR_1, command_id="b", stage="empty", gate="before")
    assert transitions(out) == [("empty", "controlPlane", "AWAITING_APPROVAL", V31)]  # now at its after gate
    out = d.command("approve", at=HOUR_1 + MIN, command_id="a", stage="empty", gate="after")
    assert transitions(out) == [
        ("empty", "controlPlane", "COMPLETE", V31),
        ("prod", "controlPlane", "IN_PROGRESS", V31),
    ]


HOUR_1 = 60 * MIN
