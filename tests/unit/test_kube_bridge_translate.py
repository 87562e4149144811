"""The bridge's pure part: which events a generation of an object publishes, under which ids, and
how the progress stream folds into a rollout resource's status (no apiserver, no broker)."""

from __future__ import annotations

from typing import Any

from rollout_adapters.kube_bridge.progress import fold
from rollout_adapters.kube_bridge.translate import (
    is_published,
    parse_event_id,
    release_plan,
    rollout_object_name,
    rollout_plan,
    sequence_plan,
)
from rollout_common.commands import RolloutTransition, StageTransition, Wait, WaitChanged
from rollout_common.events import OperatorCommand, StartRollout
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
