"""The bridge's pure part: which events a generation of an object publishes, under which ids, and
how the progress stream folds into a rollout resource's status (no apiserver, no broker)."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
from hypothesis import given

from rollout_adapters.kube_bridge.progress import fold
from rollout_adapters.kube_bridge.translate import (
    approval_for,
    approval_plan,
    is_published,
    parse_event_id,
    release_plan,
    rollout_object_name,
    rollout_plan,
    sequence_plan,
)
from rollout_common.commands import RolloutTransition, StageTransition, Wait, WaitChanged
from rollout_common.events import OperatorCommand, StartRollout
from rollout_common.gates import GatePosition
from rollout_common.status import RolloutState, StageState, Track


def _obj(spec: dict[str, Any], *, generation: int = 1, status: dict[str, Any] | None = None) -> dict[str, Any]:
    meta = {"name": "r", "namespace": "ns", "uid": "u-1", "generation": generation}
    return {"metadata": meta, "spec": spec, "status": status or {}}


def _actions(obj: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for item in rollout_plan(obj).publications:
        assert isinstance(item.model, OperatorCommand)
        out.append((item.event_id, item.model.action))
    return out


def test_operator_fields_become_one_command_each_time_they_change() -> None:
    """OPS-1, OPS-2, OPS-4: pause, resume, cancel and a retry by id, each once per change."""
    assert _actions(_obj({"rolloutId": "main-1"})) == []
    assert _actions(_obj({"rolloutId": "main-1", "paused": True}, generation=2)) == [
        ("k8s/rollout/u-1/2/pause", "pause")
    ]
    paused = {"commanded": {"paused": True, "cancelled": False}}
    assert _actions(_obj({"rolloutId": "main-1", "paused": True}, generation=3, status=paused)) == []
    assert _actions(_obj({"rolloutId": "main-1"}, generation=4, status=paused)) == [
        ("k8s/rollout/u-1/4/resume", "resume")
    ]
    assert _actions(_obj({"rolloutId": "main-1", "cancelled": True, "paused": True}, generation=5, status=paused)) == [
        ("k8s/rollout/u-1/5/cancel", "cancel")
    ]
    retried = rollout_plan(_obj({"rolloutId": "main-1", "retry": {"id": "a", "cluster": "c1"}}, generation=6))
    (command,) = [p.model for p in retried.publications]
    assert isinstance(command, OperatorCommand)
    assert (command.action, command.cluster, command.rollout_id) == ("retry", "c1", "main-1")
    assert retried.status == {
        "publishedGeneration": 6,
        "commanded": {"paused": False, "cancelled": False, "retryId": "a"},
    }
    again = _obj({"rolloutId": "main-1", "retry": {"id": "a"}}, generation=7, status={"commanded": {"retryId": "a"}})
    assert _actions(again) == []


def test_a_published_generation_is_not_published_again() -> None:
    """BUS-3: the status records the generation; a re-list of the same generation publishes nothing."""
    assert is_published(_obj({}, generation=2, status={"publishedGeneration": 2}))
    assert not is_published(_obj({}, generation=3, status={"publishedGeneration": 2}))
    assert parse_event_id("k8s/sequence/u-1/3") == ("sequence", "u-1", 3)
    assert parse_event_id("cmd-123") is None


def test_releases_and_refused_sequences() -> None:
    """START-2: an on-demand release defaults to both tracks; SEQ-1: a document the model refuses
    (an upstream cycle, which no rule on one field sees) publishes nothing and says why."""
    (item,) = release_plan(_obj({"version": "1.31.2"})).publications
    assert isinstance(item.model, StartRollout) and item.model.tracks == (Track.CONTROL_PLANE, Track.NODES)
    cycle = {
        "stages": [
            {"name": "a", "clusterNames": ["x"], "upstream": "b"},
            {"name": "b", "clusterNames": ["y"], "upstream": "a"},
        ]
    }
    plan = sequence_plan(_obj(cycle))
    assert plan.publications == ()
    assert plan.refusal is not None and "a sequence has exactly one first stage (SEQ-1)" in plan.refusal


def test_progress_folds_into_the_printed_status() -> None:
    """STAT-5: stage, state, version and the first wait of the first waiting track."""
    status: dict[str, Any] = {}
    for model in (
        RolloutTransition(rollout_id="main-1", state=RolloutState.RUNNING, reason="started"),
        StageTransition(
            rollout_id="main-1", stage="prod", track=Track.NODES, state=StageState.IN_PROGRESS,
            version="1.31.2", reason="VERSION_ARRIVED",
        ),
        WaitChanged(
            rollout_id="main-1", stage="prod", track=Track.NODES,
            waits=(Wait(rule="GATE-1", message="3 of 3 unavailable", until=0.0),),
        ),
    ):  # fmt: skip
        status = fold(status, model)
    assert {k: status[k] for k in ("state", "stage", "version", "waiting")} == {
        "state": "RUNNING",
        "stage": "prod",
        "version": "1.31.2",
        "waiting": "GATE-1: 3 of 3 unavailable",
    }
    assert status["tracks"][0]["waits"] == [
        {"rule": "GATE-1", "message": "3 of 3 unavailable", "until": "1970-01-01T00:00:00Z"}
    ]
    cleared = fold(status, WaitChanged(rollout_id="main-1", stage="prod", track=Track.NODES, waits=()))
    assert cleared["waiting"] == ""
    assert rollout_object_name("Main_1") == "main-1"


def test_the_rollout_stage_is_the_furthest_a_track_reached_whatever_order_the_tracks_report_in() -> None:
    """STAT-5: the control plane waits at prod's approval while the node track still soaks canary;
    the node track's later canary transitions do not take the printed stage back to canary, and a
    cancel that ends the stages never reached (OPS-1) does not move it on."""
    status: dict[str, Any] = {}
    for model in (
        StageTransition(
            rollout_id="main-1", stage="canary", track=Track.CONTROL_PLANE, state=StageState.IN_PROGRESS,
            version="1.31.2", reason="VERSION_ARRIVED",
        ),
        StageTransition(
            rollout_id="main-1", stage="canary", track=Track.NODES, state=StageState.IN_PROGRESS, reason="started"
        ),
        StageTransition(
            rollout_id="main-1", stage="prod", track=Track.CONTROL_PLANE, state=StageState.AWAITING_APPROVAL,
            reason="waits for the before approval", gate=GatePosition.BEFORE,
        ),
        StageTransition(
            rollout_id="main-1", stage="canary", track=Track.NODES, state=StageState.SOAKING, reason="soaking"
        ),
        WaitChanged(rollout_id="main-1", stage="canary", track=Track.NODES, waits=()),
    ):  # fmt: skip
        status = fold(status, model)
    assert (status["stage"], status["stagesReached"], status["waiting"]) == (
        "prod",
        ["canary", "prod"],
        "CHK-1: waits for the before approval",
    )
    cancelled = fold(
        status,
        StageTransition(
            rollout_id="main-1", stage="edge", track=Track.NODES, state=StageState.CANCELLED, reason="cancelled"
        ),
    )
    assert (cancelled["stage"], cancelled["stagesReached"]) == ("prod", ["canary", "prod"])


_STAGES = ("canary", "staging", "prod", "edge")


@st.composite
def _two_tracks_interleaved(draw: st.DrawFn) -> tuple[list[StageTransition], int]:
    """Each track goes through a prefix of the stages in order (a few transitions per stage); the two
    streams are interleaved at random, as the progress topic may carry them. Also the furthest
    stage index either reaches."""
    streams: list[list[StageTransition]] = []
    furthest = -1
    for track in (Track.CONTROL_PLANE, Track.NODES):
        reached = draw(st.integers(min_value=0, max_value=len(_STAGES) - 1))
        furthest = max(furthest, reached)
        stream = []
        for stage in _STAGES[: reached + 1]:
            for state in draw(st.lists(st.sampled_from(_MOVES), min_size=1, max_size=3)):
                stream.append(
                    StageTransition(rollout_id="main-1", stage=stage, track=track, state=state, reason="moved")
                )
        streams.append(stream)
    order = draw(st.permutations([0] * len(streams[0]) + [1] * len(streams[1])))
    taken = [iter(streams[0]), iter(streams[1])]
    return [next(taken[i]) for i in order], furthest


_MOVES = (StageState.IN_PROGRESS, StageState.SOAKING, StageState.AWAITING_APPROVAL, StageState.COMPLETE)


@given(_two_tracks_interleaved())
def test_the_printed_stage_is_the_furthest_reached_in_any_interleaving_of_the_tracks(
    case: tuple[list[StageTransition], int],
) -> None:
    """STAT-5 under generated orders: whatever order the two tracks' transitions arrive in, the
    rollout's stage is the furthest stage a track reached, and `stagesReached` is the sequence's
    order up to it."""
    models, furthest = case
    status: dict[str, Any] = {}
    for model in models:
        status = fold(status, model)
    assert status["stage"] == _STAGES[furthest]
    assert status["stagesReached"] == list(_STAGES[: furthest + 1])


def _approval(spec: dict[str, Any], *, generation: int = 1) -> dict[str, Any]:
    return _obj({"rolloutId": "main-1", "stage": "prod", "gate": "before", **spec}, generation=generation)


def test_an_approval_publishes_one_approve_command_once_approved() -> None:
    """CHK-1: not approved, it publishes nothing and says it waits; approved, one `approve` of its
    rollout, stage and gate under an id of its uid and generation, issued by `approvedBy`."""
    waiting = approval_plan(_approval({}))
    assert (waiting.publications, waiting.status, waiting.refusal) == ((), {"publishedGeneration": 1}, None)
    assert waiting.pending == ("Waiting", "the gate waits: set spec.approved to true (and approvedBy) to open it")
    plan = approval_plan(_approval({"approved": True, "approvedBy": "alice", "comment": "CHG-7"}, generation=2))
    (item,) = plan.publications
    command = item.model
    assert isinstance(command, OperatorCommand)
    assert (item.event_id, command.command_id) == ("k8s/approval/u-1/2/approve", "k8s/approval/u-1/2/approve")
    assert (command.action, command.rollout_id, command.stage, command.gate) == (
        "approve",
        "main-1",
        "prod",
        GatePosition.BEFORE,
    )
    assert (command.issued_by, command.comment, command.misplaced_field()) == ("alice", "CHG-7", None)
    assert plan.status == {"publishedGeneration": 2, "eventId": "k8s/approval/u-1/2/approve"}
    assert plan.pending == ("Published", "published; waiting for the planner's answer")
    unnamed = approval_plan(_approval({"approved": True}, generation=2)).publications[0].model
    assert isinstance(unnamed, OperatorCommand) and unnamed.issued_by == "kubernetes:ns/approval/r"


def test_a_track_awaiting_approval_asks_for_its_gate_s_approval_object() -> None:
    """CHK-1: both tracks at a gate ask for the same object; other transitions ask for none."""

    def at(track: Track, state: StageState, gate: GatePosition | None) -> StageTransition:
        return StageTransition(
            rollout_id="Main_1", stage="prod", track=track, state=state, reason="r", gate=gate
        )  # fmt: skip

    spec = {"rolloutId": "Main_1", "stage": "prod", "gate": "after"}
    assert approval_for(at(Track.NODES, StageState.AWAITING_APPROVAL, GatePosition.AFTER)) == (
        "main-1-prod-after",
        spec,
    )
    assert approval_for(at(Track.CONTROL_PLANE, StageState.AWAITING_APPROVAL, GatePosition.AFTER)) == (
        "main-1-prod-after",
        spec,
    )
    assert approval_for(at(Track.NODES, StageState.IN_PROGRESS, None)) is None


def test_a_track_awaiting_approval_is_the_printed_wait() -> None:
    """STAT-5, CHK-1: a track held at a gate is why the rollout waits, before any other wait."""
    status: dict[str, Any] = {}
    for model in (
        WaitChanged(rollout_id="main-1", stage="canary", track=Track.NODES, waits=(Wait(rule="WIN", message="shut"),)),
        StageTransition(
            rollout_id="main-1", stage="prod", track=Track.CONTROL_PLANE, state=StageState.AWAITING_APPROVAL,
            reason="waits for the before approval", gate=GatePosition.BEFORE,
        ),
    ):  # fmt: skip
        status = fold(status, model)
    assert status["waiting"] == "CHK-1: waits for the before approval"
    opened = StageTransition(
        rollout_id="main-1", stage="prod", track=Track.CONTROL_PLANE, state=StageState.IN_PROGRESS, reason="approved"
    )
    assert fold(status, opened)["waiting"] == "WIN: shut"
