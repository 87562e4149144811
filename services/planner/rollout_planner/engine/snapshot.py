"""Persisting the engine state: facts only, derived counters and queues rebuilt on load.

Only what was observed or decided is stored (versions, running upgrades, runs, offers, timers);
partitions, per-partition counters, queues and run membership are recomputed by the same code the
planner runs, so a snapshot cannot disagree with itself.
"""

from __future__ import annotations

import json
from typing import Any

from rollout_common.fleet import Cluster, ClusterGroup
from rollout_common.sequence import Sequence
from rollout_common.status import RolloutState, StageState
from rollout_common.version import Version, parse_minor, parse_version
from rollout_planner.engine.inventory import rebuild_stage
from rollout_planner.engine.model import (
    NO_PAIR,
    NO_RETRIES,
    ClusterRec,
    EngineState,
    Offer,
    RolloutRec,
    Run,
    put,
    put_count,
)
from rollout_planner.engine.tally import recount_departed

# 2: timers name their stage, track and reference as fields
# 3: offers and GATE-1 first batches belong to runs; in-flight upgrades keep the stage and partition
#    that handed them out; clusters removed mid-upgrade; retries, observation times, run's prior state
FORMAT_VERSION = 3


def _v(version: Version | None) -> str | None:
    return None if version is None else version.text


def _pv(text: str | None) -> Version | None:
    return None if text is None else parse_version(text)


def dump(state: EngineState) -> bytes:
    doc = {
        "format": FORMAT_VERSION,
        "sequence": state.sequence.model_dump(mode="json", by_alias=True),
        "now": state.now,
        "nextCommand": state.next_command,
        "requestedWake": state.requested_wake,
        "seen": sorted(state.seen_events),
        "soakOverrides": [[s, v, d] for (s, v), d in state.soak_overrides.items()],
        "timers": [[t.at, t.kind, t.stage, t.track, t.ref] for t in state.timers],
        "rollouts": [_rollout(r) for r in state.rollouts.values()],
        "clusters": [_cluster(c) for c in state.clusters.values()],
        "groups": [g.model_dump(mode="json", by_alias=True) for g in state.groups.values()],
        "departed": [_cluster(c) for c in state.departed.values()],
        "left": [_cluster(c) for c in state.left.values()],
        "stages": [_stage(s) for s in state.stages],
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def _rollout(r: RolloutRec) -> dict[str, Any]:
    return {
        "id": r.id,
        "eventId": r.event_id,
        "createdAt": r.created_at,
        "tracks": list(r.tracks),
        "byMinor": None if r.by_minor is None else {str(m): v.text for m, v in r.by_minor.items()},
        "version": _v(r.version),
        "state": r.state.value,
        "paused": r.paused,
        "reason": r.reason,
    }


def _cluster(c: ClusterRec) -> dict[str, Any]:
    return {
        "spec": c.spec.model_dump(mode="json", by_alias=True, exclude_none=True),
        "versions": [v.text for v in c.versions],
        "ready": c.ready,
        "running": [_v(v) for v in c.running],
        "runningCmd": c.running_cmd,
        "awaitingReady": c.awaiting_ready,
        "failed": c.failed,
        "doneBy": [sorted(s) for s in c.done_by],
        "waitingUntil": c.waiting_until,
        # a running or failed upgrade's target is a decision already made: kept, not recomputed
        "keptTarget": [[_v(c.target[t]), c.target_run[t]] if _kept(c, t) else None for t in (0, 1)],
        "origin": [None if o is None else list(o) for o in c.origin],
        "retries": list(c.retries),
        "observedAt": c.observed_at,
        "finishedAt": c.finished_at,
        # only when a cluster disagrees: absent in snapshots written before versions were checked,
        # so the format stays readable both ways
        **({} if c.mismatch is NO_PAIR else {"mismatch": [_v(v) for v in c.mismatch]}),
    }


def _kept(c: ClusterRec, track: int) -> bool:
    return c.running[track] is not None or (c.failed[track] is not None and c.target[track] is not None)


def _stage(s: Any) -> dict[str, Any]:
    return {
        "names": s.members + s.no_partition,
        "runs": [[_run(r) for r in track.values()] for track in s.runs],
        "forcedRun": s.forced_run,
        "handed": [[name, track, position] for (name, track), position in s.handed.items()],
    }


def _offer(o: Offer) -> dict[str, Any]:
    return {
        "rollout": o.rollout_id,
        "version": _v(o.version),
        "onDemand": o.on_demand,
        "byMinor": None if o.by_minor is None else {str(m): v.text for m, v in o.by_minor.items()},
    }


def _run(r: Run) -> dict[str, Any]:
    return {
        "rollout": r.rollout_id,
        "stage": r.stage,
        "track": r.track,
        "state": r.state.value,
        "reason": r.reason,
        "openedAt": r.opened_at,
        "startedAt": r.started_at,
        "finishedAt": r.finished_at,
        "soakStarted": r.soak_started,
        "soakEnd": r.soak_end,
        "forced": r.forced,
        "working": sorted(v.text for v in r.working),
        "upgraded": sorted(v.text for v in r.upgraded),
        "superseded": r.superseded,
        "failures": r.failures,
        "qualified": _v(r.qualified),
        "offered": _v(r.offered),
        "awaitingCp": r.awaiting_cp,
        "offer": None if r.offer is None else _offer(r.offer),
        "firstBatches": sorted(r.first_batches),
        "prior": None if r.prior is None else r.prior.value,
    }


def load(data: bytes) -> EngineState:
    doc = json.loads(data)
    if doc.get("format") != FORMAT_VERSION:
        raise ValueError(f"snapshot format {doc.get('format')!r} is not {FORMAT_VERSION}")
    state = EngineState(sequence=Sequence.model_validate(doc["sequence"]))
    state.now = doc["now"]
    state.next_command = doc["nextCommand"]
    state.requested_wake = doc["requestedWake"]
    state.seen_events = set(doc["seen"])
    state.soak_overrides = {(s, v): d for s, v, d in doc["soakOverrides"]}
    state.timers = []
    for at, kind, stage, track, ref in doc["timers"]:
        if kind == "cluster":
            state.add_cluster_timer(at, name=ref, track=track)
        else:
            state.add_run_timer(at, kind, stage=stage, track=track, rollout_id=ref)
    for raw in doc["rollouts"]:
        state.rollouts[raw["id"]] = _load_rollout(raw)
    for raw in doc["clusters"]:
        record = _load_cluster(raw)
        state.clusters[record.name] = record
    # absent in snapshots written before cluster groups were inventory objects
    state.groups = {g.name: g for g in (ClusterGroup.model_validate(raw) for raw in doc.get("groups", []))}
    for raw in doc["departed"]:
        record = _load_cluster(raw)
        state.departed[record.name] = record
    for raw in doc.get("left", []):  # absent in snapshots written before left clusters were kept
        record = _load_cluster(raw)
        state.left[record.name] = record
    for stage, raw in zip(state.stages, doc["stages"], strict=True):
        _load_stage(state, stage, raw)
    for stage in state.stages:
        recount_departed(state, stage)  # once every cluster is placed again
    # an upgrade in flight counts for the run that handed it out, wherever the cluster is now; a
    # failed one for its stage's run (retargeting passed over both)
    for cluster in [*state.clusters.values(), *state.departed.values()]:
        for track, origin in enumerate(cluster.origin):
            if cluster.running[track] is not None and origin is not None:
                where: int | None = origin[0]
            elif cluster.failed[track] is not None and cluster.partition is not None:
                where = cluster.stage
            else:
                continue
            if where is not None:
                run = state.stages[where].runs[track].get(cluster.target_run[track] or "")
                if run is not None:
                    run.remaining += 1
    state.out = []
    # a restarted planner looks at every stage once: dispatching an unchanged stage changes nothing
    state.dirty = set(range(len(state.stages)))
    return state


def _load_rollout(raw: dict[str, Any]) -> RolloutRec:
    by_minor = raw["byMinor"]
    return RolloutRec(
        id=raw["id"],
        event_id=raw["eventId"],
        created_at=raw["createdAt"],
        by_minor=None if by_minor is None else {parse_minor(m): parse_version(v) for m, v in by_minor.items()},
        version=_pv(raw["version"]),
        tracks=tuple(raw["tracks"]),
        state=RolloutState(raw["state"]),
        paused=raw["paused"],
        reason=raw["reason"],
    )


def _pair(raw: list[Any]) -> Any:
    return put(put(NO_PAIR, 0, raw[0]), 1, raw[1])


def _load_cluster(raw: dict[str, Any]) -> ClusterRec:
    record = ClusterRec(Cluster.model_validate(raw["spec"]))
    record.versions = [parse_version(v) for v in raw["versions"]]
    record.ready = raw["ready"]
    record.running = [_pv(v) for v in raw["running"]]
    record.running_cmd = _pair(raw["runningCmd"])
    record.awaiting_ready = raw["awaitingReady"]
    record.failed = _pair(raw["failed"])
    record.done_by = (frozenset(raw["doneBy"][0]), frozenset(raw["doneBy"][1]))
    record.waiting_until = _pair(raw["waitingUntil"])
    for track, kept in enumerate(raw["keptTarget"]):
        if kept is not None:
            record.target[track] = _pv(kept[0])
            record.target_run[track] = kept[1]
    origin = [None if o is None else (o[0], o[1]) for o in raw["origin"]]
    record.origin = put(put(NO_PAIR, 0, origin[0]), 1, origin[1])
    record.retries = put_count(put_count(NO_RETRIES, 0, raw["retries"][0]), 1, raw["retries"][1])
    record.observed_at = raw["observedAt"]
    record.finished_at = raw["finishedAt"]
    mismatch = raw.get("mismatch") or [None, None]
    record.mismatch = _pair([_pv(mismatch[0]), _pv(mismatch[1])])
    return record


def _load_stage(state: EngineState, stage: Any, raw: dict[str, Any]) -> None:
    for track, runs in enumerate(raw["runs"]):
        stage.runs[track] = {r["rollout"]: _load_run(r) for r in runs}
    stage.forced_run = raw["forcedRun"]
    stage.handed = {(name, track): position for name, track, position in raw["handed"]}
    rebuild_stage(state, stage, list(raw["names"]))


def _load_offer(raw: dict[str, Any]) -> Offer:
    by_minor = raw["byMinor"]
    return Offer(
        raw["rollout"],
        version=_pv(raw["version"]),
        on_demand=raw["onDemand"],
        by_minor=None if by_minor is None else {parse_minor(m): parse_version(v) for m, v in by_minor.items()},
    )


def _load_run(raw: dict[str, Any]) -> Run:
    run = Run(
        raw["rollout"],
        raw["stage"],
        raw["track"],
        StageState(raw["state"]),
        raw["reason"],
        opened_at=raw["openedAt"],
        started_at=raw["startedAt"],
        finished_at=raw["finishedAt"],
        soak_started=raw["soakStarted"],
        soak_end=raw["soakEnd"],
        forced=raw["forced"],
        superseded=raw["superseded"],
        failures=raw["failures"],
        qualified=_pv(raw["qualified"]),
        offered=_pv(raw["offered"]),
        awaiting_cp=raw["awaitingCp"],
    )
    run.offer = None if raw["offer"] is None else _load_offer(raw["offer"])
    run.first_batches = set(raw["firstBatches"])
    run.prior = None if raw["prior"] is None else StageState(raw["prior"])
    run.working = {parse_version(v) for v in raw["working"]}
    run.upgraded = {parse_version(v) for v in raw["upgraded"]}
    return run
