"""OPS-1..3 (acknowledged operator commands) and STAT-1..5 (statuses and why the planner waits)."""

from __future__ import annotations

import pytest
from enginekit import (
    CP,
    DAY,
    HOUR,
    MIN,
    NODES,
    T0,
    V31,
    V32,
    Driver,
    acks,
    advances,
    cluster,
    names,
    sequence,
    stage,
    transitions,
)
from pydantic import ValidationError

from rollout_common.commands import RolloutTransition
from rollout_common.events import OperatorCommand
from rollout_planner.engine.reasons import window_waits
from rollout_planner.engine.views import stage_view, track_status

REL = {"1.30": V31}
IDX = {CP: 0, NODES: 1}


def status(d: Driver, name: str, track=CP) -> tuple[str, str | None]:
    s, why = track_status(d.state, d.state.clusters[name], IDX[track])
    return s.value, why


def slow(count: int = 4) -> Driver:
    return Driver(
        sequence(stage("a", soak="1d", rolloutStrategy={"maxNew": 1, "maxUnavailable": 0}), stage("b")),
        [cluster(n) for n in names("a", count)] + [cluster("b-1")],
    )


# ----------------------------------------------------------------------------- OPS
def test_ops_1_pause_stops_new_batches_and_resume_picks_up_at_once() -> None:
    d = slow()
    d.release(REL)
    out = d.command("pause", at=5 * MIN)
    assert acks(out) == [("cmd-1", True, "pause applied")]
    assert [(c.state.value) for c in out if isinstance(c, RolloutTransition)] == ["PAUSED"]
    assert transitions(out) == [("a", "controlPlane", "PAUSED", V31), ("a", "nodes", "PAUSED", V31)]
    d.finish(["a-01"], CP, at=10 * MIN, ready=True)
    assert advances(d.ready(["a-01"], at=20 * MIN)) == []
    out = d.command("resume", at=1 * HOUR, command_id="cmd-2")
    assert acks(out) == [("cmd-2", True, "resume applied")]
    assert advances(out) == [("a", "nodes", V31, ["a-01"])]


def test_ops_1_cancel_marks_cancelled_and_stops_for_good() -> None:
    d = slow()
    d.release(REL)
    out = d.command("cancel", at=5 * MIN)
    assert [(c.state.value) for c in out if isinstance(c, RolloutTransition)] == ["CANCELLED"]
    # every stage and track not COMPLETE, the ones never reached included (b)
    assert transitions(out) == [
        ("a", "controlPlane", "CANCELLED", V31),
        ("a", "nodes", "CANCELLED", V31),
        ("b", "controlPlane", "CANCELLED", None),
        ("b", "nodes", "CANCELLED", None),
    ]
    assert advances(d.finish(["a-01"], CP, at=10 * MIN, ready=True)) == []
    assert acks(d.command("resume", at=1 * HOUR, command_id="cmd-2")) == [("cmd-2", False, "no active rollout")]


def test_ops_3_rejections_say_why() -> None:
    d = slow()
    assert acks(d.command("pause", at=0)) == [("cmd-1", False, "no active rollout")]
    d.release(REL, at=1)
    assert acks(d.command("pause", at=2, command_id="c2", rollout_id="main-9")) == [
        ("c2", False, "unknown rollout main-9")
    ]
    assert acks(d.command("soak_override", at=3, command_id="c3", stage="nope", version=V31, soak=0)) == [
        ("c3", False, "unknown stage 'nope'")
    ]
    ((cid, ok, why),) = acks(d.command("soak_override", at=4, command_id="c4", stage="a", version="latest", soak=0))
    assert (cid, ok) == ("c4", False) and "is not a version" in why


def test_ops_3_redelivered_command_is_acknowledged_once() -> None:
    d = slow()
    d.release(REL)
    assert len(acks(d.command("pause", at=1, command_id="same"))) == 1
    assert acks(d.command("pause", at=2, command_id="same")) == []


@pytest.mark.parametrize("soak", ["31d", -1])
def test_soak_3_ops_2_override_outside_0_to_30_days_is_rejected(soak: object) -> None:
    with pytest.raises(ValidationError, match="soak"):
        OperatorCommand(command_id="x", action="soak_override", stage="a", version=V31, soak=soak)


def test_ops_2_override_during_soak_recomputes_the_end_from_the_soak_start() -> None:
    d = Driver(sequence(stage("a", soak="7d"), stage("b")), [cluster("a-1"), cluster("b-1")])
    d.release(REL)
    d.finish(["a-1"], CP, at=10 * MIN)
    out = d.command("soak_override", at=1 * DAY, stage="a", version=V31, soak=30 * DAY)
    assert acks(out) == [("cmd-1", True, "soak_override applied")]
    assert [c.until for c in out if hasattr(c, "until") and getattr(c, "state", None) is not None] == [
        T0 + 10 * MIN + 30 * DAY
    ]
    assert advances(d.wake(at=7 * DAY + 10 * MIN)) == []
    out = d.command("soak_override", at=8 * DAY, command_id="cmd-2", stage="a", version=V31, soak=None)
    assert ("a", "controlPlane", "COMPLETE", V31) in transitions(out)
    assert advances(out, CP) == [("b", "controlPlane", V31, ["b-1"])]


# ----------------------------------------------------------------------------- STAT-1
def test_stat_1_statuses_along_one_clusters_upgrade() -> None:
    d = slow(3)
    assert status(d, "a-01") == ("PENDING", "no version has reached this stage yet")
    d.release(REL)
    assert status(d, "a-01")[0] == "IN_PROGRESS"
    assert status(d, "a-02")[0] == "OUT_OF_SYNC"
    assert status(d, "a-02", NODES) == ("PENDING", "waits for its control plane (SOAK-1)")
    d.finish(["a-01"], CP, at=10 * MIN)
    assert status(d, "a-01", CP) == ("NOT_READY", "upgraded, not yet reported ready")
    d.finish(["a-01"], NODES, at=40 * MIN)
    d.ready(["a-01"], at=41 * MIN)
    assert status(d, "a-01", CP) == ("COMPLETE", None)
    assert status(d, "a-01", NODES) == ("COMPLETE", None)
    assert status(d, "b-1") == ("PENDING", "no version has reached this stage yet")


def test_stat_1_failed_carries_the_executors_error() -> None:
    d = slow(2)
    d.release(REL)
    d.finish(["a-01"], CP, at=10 * MIN, outcome="failed")
    assert status(d, "a-01") == ("FAILED", "boom")


def test_stat_1_paused_types() -> None:
    excl = [{"start": "2026-01-01T00:00:00Z", "end": "2026-02-01T00:00:00Z", "scope": "NO_UPGRADES"}]
    d = Driver(
        sequence(stage("a")),
        [cluster("a-1", exclusions=excl), cluster("a-2", deprecatedApiUsage=True), cluster("a-3"), cluster("a-4")],
    )
    d.release(REL)
    assert status(d, "a-1") == ("PAUSED", "MAINTENANCE_POLICY")
    assert status(d, "a-2") == ("PAUSED", "DEPRECATED_API")
    d2 = slow(3)
    d2.release(REL)
    d2.command("pause", at=1)
    assert status(d2, "a-02") == ("PAUSED", "USER")


def test_stat_1_ineligible_types_and_skipped_newer() -> None:
    part = [{"name": "only", "clusterName": "a-1"}]
    d = Driver(
        sequence(stage("a", soak="0d", rolloutStrategy={"partitions": part}), stage("b")),
        [
            cluster("a-1"),
            cluster("a-2"),
            cluster("a-3", channel="rapid"),
            cluster("b-1", "1.28.1"),
            cluster("b-2", V32),
        ],
    )
    d.release(REL)
    assert status(d, "a-2") == ("INELIGIBLE", "NO_PARTITION")
    assert status(d, "a-3") == ("INELIGIBLE", "OTHER_CHANNEL")
    d.finish(["a-1"], CP, at=10 * MIN)
    assert status(d, "b-1") == ("INELIGIBLE", "INCOMPATIBLE_VERSION")
    assert status(d, "b-2")[0] == "SKIPPED_NEWER"


# ----------------------------------------------------------------------------- STAT-2..5, WIN-4
def test_stat_2_stage_view_counts_and_qualified_versions() -> None:
    d = Driver(sequence(stage("a", soak="0d"), stage("b")), [cluster("a-1"), cluster("a-2"), cluster("b-1")])
    d.release(REL)
    d.finish(["a-1", "a-2"], CP, at=10 * MIN)
    view = stage_view(d.state, d.state.stages[0])
    cp = view["tracks"]["controlPlane"]
    assert (view["clusters"], cp["state"], cp["qualified"], cp["rollout"]) == (2, "COMPLETE", [V31], "main-1")
    assert cp["counts"] == {"NOT_READY": 2}


def test_stat_5_win_4_waiting_clusters_say_when_their_window_opens() -> None:
    win = {"start": "2026-01-01T06:00:00Z", "duration": "2h", "recurrence": "FREQ=DAILY"}
    d = Driver(sequence(stage("a")), [cluster("a-1", maintenanceWindow=win), cluster("a-2")])
    assert advances(d.release(REL)) == [("a", "controlPlane", V31, ["a-2"])]
    (w,) = window_waits(d.state, d.state.stages[0], 0)
    assert (w.rule, w.clusters, w.until, w.numbers) == ("WIN", ("a-1",), T0 + 6 * HOUR, {"waiting": 1})
    assert advances(d.wake(at=6 * HOUR)) == [("a", "controlPlane", V31, ["a-1"])]
