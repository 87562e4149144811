"""The planner's progress stream folded into a rollout resource's status (STAT-5), purely."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel

from rollout_common.commands import RolloutTransition, StageTransition, Wait, WaitChanged
from rollout_common.status import StageState


def rollout_id_of(model: BaseModel) -> str | None:
    """The rollout a progress event is about, when it is one of those that shape its status."""
    if isinstance(model, (RolloutTransition, StageTransition, WaitChanged)):
        return model.rollout_id
    return None


def fold(status: dict[str, Any], model: BaseModel) -> dict[str, Any]:
    """The status after `model`; `status` is the resource's status as last written."""
    out = {**status, "tracks": [dict(t) for t in status.get("tracks") or []]}
    if isinstance(model, RolloutTransition):
        out["state"], out["reason"] = model.state.value, model.reason
        return out
    if not isinstance(model, (StageTransition, WaitChanged)):
        return out
    track = _track(out, model.track.value)
    if isinstance(model, StageTransition):
        track.update(stage=model.stage, state=model.state.value, reason=model.reason)
        if model.version is not None:
            track["version"] = model.version
            out["version"] = model.version
    else:
        track["stage"] = model.stage
        track["waits"] = [_wait(w) for w in model.waits]
    _reach(out, model)
    out["waiting"] = _waiting(out["tracks"])
    return out


def _reach(status: dict[str, Any], model: StageTransition | WaitChanged) -> None:
    """The rollout's stage is the furthest one a track of it has reached. The two tracks move
    apart (one may soak at canary while the other waits at prod), so the stage of the last event
    would jump back and forth with their order; a track reaches the stages in sequence order, so
    the order in which stages are first seen is that order. A cancel ends the stages the version
    never reached too (OPS-1): those are not reached."""
    reached = list(status.get("stagesReached") or [])
    cancelled = isinstance(model, StageTransition) and model.state is StageState.CANCELLED
    if model.stage not in reached and not cancelled:
        reached.append(model.stage)
    status["stagesReached"] = reached
    if reached:
        status["stage"] = reached[-1]


def _track(status: dict[str, Any], name: str) -> dict[str, Any]:
    """The track's entry in `status` (copied by `fold`, so changed in place), added when new."""
    for track in status["tracks"]:
        if track["track"] == name:
            return track  # type: ignore[no-any-return]
    track = {"track": name, "stage": "", "state": "PENDING"}
    status["tracks"].append(track)
    return track


def _wait(wait: Wait) -> dict[str, Any]:
    out: dict[str, Any] = {"rule": wait.rule, "message": wait.message}
    if wait.partition is not None:
        out["partition"] = wait.partition
    if wait.until is not None:
        out["until"] = dt.datetime.fromtimestamp(wait.until, tz=dt.UTC).isoformat().replace("+00:00", "Z")
    return out


def _waiting(tracks: list[dict[str, Any]]) -> str:
    """One line for the printer column: a track held at an approval gate (CHK-1) first, since
    nothing else moves it on; else the first wait of the first track that has one."""
    for track in tracks:
        if track.get("state") == StageState.AWAITING_APPROVAL.value:
            return f"CHK-1: {track.get('reason', '')}"
    for track in tracks:
        for wait in track.get("waits") or []:
            return f"{wait['rule']}: {wait['message']}"
    return ""
