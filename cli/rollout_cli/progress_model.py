"""A status document kept up to date from progress events, for `rollout watch` (`ProgressModel`)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from rollout_cli.gate_events import gate_waits, record_approval_ack, record_gate
from rollout_common.status_words import TRACK_NAMES

Doc = Mapping[str, Any]


def empty_document(now: float) -> dict[str, Any]:
    return {"now": now, "stages": [], "rollouts": [], "nextWakeUp": None, "attention": None}


def _empty_track() -> dict[str, Any]:
    return {
        "state": "PENDING",
        "rollout": None,
        "reason": None,
        "version": None,
        "soakEnd": None,
        "startedAt": None,
        "finishedAt": None,
        "counts": {},
        "qualified": [],
        "partitions": [],
        "waits": [],
    }


class ProgressModel:
    """A status document (as the planner writes it, or empty) moved forward by progress events.

    Stage transitions, waits and rollout transitions are exact; batches move their clusters to
    IN_PROGRESS and count them unavailable, an estimate until the next status document, since
    upgrade results and readiness do not travel on the progress topic.
    """

    def __init__(self, doc: Doc | None, *, now: float) -> None:
        self.doc: dict[str, Any] = copy.deepcopy(dict(doc)) if doc else empty_document(now)
        self.doc.setdefault("rollouts", [])

    def apply(self, body: Mapping[str, Any], *, at: float | None) -> None:
        if at is not None:
            self.doc["now"] = max(float(self.doc.get("now") or 0.0), at)
        kind = body.get("kind")
        if kind == "stage_transition":
            self._transition(body)
        elif kind == "wait_changed":
            self._track(body)["waits"] = [dict(w) for w in body.get("waits", [])]
        elif kind == "stage_advance":
            self._batch(body)
        elif kind == "command_ack":
            record_approval_ack(self.doc["stages"], body, now=self.doc["now"])
        elif kind == "rollout_transition":
            self._rollout(body)["state"] = body["state"]
            self._rollout(body)["reason"] = body.get("reason")

    def take_checks(self, stored: Mapping[str, Any] | None) -> None:
        """Each stage's metric checks (CHK-2) from a newer stored status: check results do not travel
        on the progress topic, so a watch takes their latest values from the planner's status."""
        if not stored:
            return
        for stage in stored.get("stages", ()):
            if stage.get("checks"):
                self._stage(stage["name"])["checks"] = copy.deepcopy(list(stage["checks"]))

    def _stage(self, name: str) -> dict[str, Any]:
        for existing in self.doc["stages"]:
            if existing["name"] == name:
                found: dict[str, Any] = existing
                return found
        stage: dict[str, Any] = {
            "name": name,
            "clusters": 0,
            "tracks": {track: _empty_track() for track in TRACK_NAMES},
        }
        self.doc["stages"].append(stage)
        return stage

    def _track(self, body: Mapping[str, Any]) -> dict[str, Any]:
        track: dict[str, Any] = self._stage(str(body["stage"]))["tracks"][str(body["track"])]
        return track

    def _transition(self, body: Mapping[str, Any]) -> None:
        track, state, now = self._track(body), str(body["state"]), self.doc["now"]
        record_gate(self._stage(str(body["stage"])).setdefault("gates", []), body, prior=track["state"], now=now)
        track.update(state=state, reason=body.get("reason"), rollout=body.get("rolloutId"))
        track["version"] = body.get("version") or track["version"]
        if state in ("SOAKING", "FORCED_SOAKING"):
            track["soakEnd"] = body.get("until")
            track["finishedAt"] = now
        elif state == "IN_PROGRESS" and track["startedAt"] is None:
            track["startedAt"] = now
        elif state == "COMPLETE" and track["version"] and track["version"] not in track["qualified"]:
            track["qualified"] = sorted([*track["qualified"], track["version"]])
        if state not in ("IN_PROGRESS", "PAUSED"):
            track["waits"] = gate_waits(body)
        self._rollout_stage(body, state)

    def _batch(self, body: Mapping[str, Any]) -> None:
        track, sent = self._track(body), len(body.get("clusters", ()))
        counts = track["counts"]
        left = sent
        for source in ("OUT_OF_SYNC", "PENDING"):
            taken = min(left, counts.get(source, 0))
            counts[source] = counts.get(source, 0) - taken
            left -= taken
        counts["IN_PROGRESS"] = counts.get("IN_PROGRESS", 0) + sent
        for partition in track["partitions"]:
            if partition["name"] == body.get("partition"):
                partition["unavailable"] += sent

    def _rollout(self, body: Mapping[str, Any]) -> dict[str, Any]:
        rollout_id = str(body["rolloutId"])
        for rollout in self.doc["rollouts"]:
            if rollout["id"] == rollout_id:
                found: dict[str, Any] = rollout
                return found
        rollout = {"id": rollout_id, "state": "RUNNING", "reason": None, "versions": [], "targets": {}, "stages": []}
        self.doc["rollouts"].append(rollout)
        return rollout

    def _rollout_stage(self, body: Mapping[str, Any], state: str) -> None:
        if not body.get("rolloutId"):
            return
        rollout = self._rollout(body)
        if body.get("version") and body["version"] not in rollout["versions"]:
            rollout["versions"] = [*rollout["versions"], body["version"]]
        stages = rollout.setdefault("stages", [])
        entry = next((s for s in stages if s["stage"] == body["stage"] and s["track"] == body["track"]), None)
        if entry is None:
            entry = {"stage": body["stage"], "track": body["track"], "startedAt": None, "finishedAt": None}
            stages.append(entry)
        entry["state"] = state
        if state == "IN_PROGRESS" and entry["startedAt"] is None:
            entry["startedAt"] = self.doc["now"]
        if state in ("SOAKING", "FORCED_SOAKING"):
            entry["finishedAt"] = self.doc["now"]
