"""The status document written to the store after every batch: readable without Kafka (STAT-2..5).

It is what `rollout status` draws: per rollout its state, release and per-stage start/finish
(STAT-4); per stage and track the engine's `stage_view` (STAT-2, STAT-3, STAT-5 waits); the next
wake-up and what it is for; the clusters that need a person (failed, with the executor's error;
paused by a window, with when it opens; paused for deprecated API use; upgraded but reporting
another version).

It is written after every planner batch, so its cost stays linear in the fleet with a small
constant: one pass over the clusters besides `stage_view`'s, and every list of cluster names is
capped at `NAMES_CAP` with the total beside it.
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Callable
from typing import Any, TypeVar

from rollout_common.status import TRACKS
from rollout_common.version import Version
from rollout_planner.engine.gates.budgets import budget_end
from rollout_planner.engine.gates.checks import halted
from rollout_planner.engine.gates.start_windows import held_by_window
from rollout_planner.engine.model import NO_PAIR, TRACK_INDEXES, ClusterRec, EngineState, RolloutRec, Timer
from rollout_planner.engine.views import stage_view

NAMES_CAP = 20
_Value = TypeVar("_Value")


def status_document(state: EngineState, *, batch: int) -> dict[str, Any]:
    return {
        "sequence": state.sequence.name,
        "channel": state.sequence.channel,
        "now": state.now,
        "batch": batch,
        "clusters": len(state.clusters),
        "stages": [stage_view(state, stage) for stage in state.stages],
        "rollouts": [_rollout_view(state, rollout) for rollout in state.rollouts.values()],
        "nextWakeUp": next_wake_up(state),
        "attention": attention(state),
    }


def encode_status(state: EngineState, *, batch: int) -> bytes:
    return json.dumps(status_document(state, batch=batch), default=str).encode()


def _rollout_view(state: EngineState, rollout: RolloutRec) -> dict[str, Any]:
    return {
        "id": rollout.id,
        "eventId": rollout.event_id,
        "state": rollout.state.value,
        "reason": rollout.reason,
        "createdAt": rollout.created_at,
        "versions": [version.text for version in rollout.versions()],
        "targets": {str(minor): v.text for minor, v in (rollout.by_minor or {}).items()},
        "onDemand": rollout.on_demand,
        "stages": _rollout_stages(state, rollout.id),
    }


def _rollout_stages(state: EngineState, rollout_id: str) -> list[dict[str, Any]]:
    """STAT-4: when each stage (track) of this rollout started and finished; stages not reached are left out."""
    out = []
    for stage in state.stages:
        for track in TRACK_INDEXES:
            run = stage.runs[track].get(rollout_id)
            if run is not None:
                out.append(
                    {
                        "stage": stage.spec.name,
                        "track": TRACKS[track].value,
                        "state": run.state.value,
                        "startedAt": run.started_at,
                        "finishedAt": run.finished_at,
                    }
                )
    return out


def next_wake_up(state: EngineState) -> dict[str, Any] | None:
    """The earliest timer that will change something: when the planner next acts without an event, and why.

    The engine leaves timers in its heap when what they were for ended sooner (a soak overridden, a
    track finished before its 30-day deadline); those wake the planner for nothing and are skipped.
    One linear pass: the heap holds at most a timer per waiting cluster track and per run.
    """
    live = [timer for timer in state.timers if _live(state, timer)]
    if not live:
        return None
    timer = min(live)
    if timer.kind == "cluster":
        cluster = state.clusters[timer.ref]
        what = "disruption budget" if _budget_end(state, cluster, timer.track) is not None else "maintenance window"
        verb = "ends (CHK-4)" if what == "disruption budget" else "opens"
        why = f"the {what} of {timer.ref} ({TRACKS[timer.track].value}) {verb}"
    else:
        rollout_id = timer.ref
        where = f"{state.stages[timer.stage].spec.name}/{TRACKS[timer.track].value}"
        if timer.kind == "soak":
            why = f"the soak of {where} ends (rollout {rollout_id})"
        elif timer.kind == "window":
            why = f"the start window of {where} opens (CHK-3, rollout {rollout_id})"
        else:
            why = f"{where} reaches its 30-day maximum upgrade time and soaks anyway (SOAK-4, rollout {rollout_id})"
    return {"at": timer.at, "kind": timer.kind, "why": why}


def _live(state: EngineState, timer: Timer) -> bool:
    if timer.kind == "cluster":
        cluster = state.clusters.get(timer.ref)
        return cluster is not None and cluster.waiting_until[timer.track] is not None
    run = state.stages[timer.stage].runs[timer.track].get(timer.ref)
    if run is None:
        return False
    if timer.kind == "soak":
        return run.soaking and run.soak_end == timer.at
    if timer.kind == "window":
        return held_by_window(run)
    # a run a check halted is not forced to soak at its deadline (CHK-2): only a resume moves it
    return timer.kind == "deadline" and run.active and not halted(run)


def attention(state: EngineState) -> dict[str, Any]:
    """Clusters a person must look at: failed upgrades and paused clusters, each list capped."""
    failed: list[dict[str, Any]] = []
    mismatched: list[dict[str, Any]] = []
    deprecated: list[str] = []
    windows: list[tuple[float, str, int]] = []
    budgets: list[tuple[float, str, int]] = []
    failed_total = deprecated_total = mismatched_total = 0
    for cluster in state.clusters.values():
        mismatched_total += _track_rows(mismatched, cluster, values=cluster.mismatch, details=_mismatch_details)
        failed_total += _track_rows(failed, cluster, values=cluster.failed, details=_failure_details)
        if cluster.waiting_until is not NO_PAIR:
            _add_paused(state, cluster, windows=windows, budgets=budgets)
        if cluster.profile.deprecated_api_usage and any(v is not None for v in cluster.target):
            deprecated_total += 1
            if len(deprecated) < NAMES_CAP:
                deprecated.append(cluster.name)
    return {
        "failed": failed,
        "failedTotal": failed_total,
        **_paused_lists(windows, budgets),
        "pausedDeprecated": deprecated,
        "pausedDeprecatedTotal": deprecated_total,
        # upgraded, but the cluster reports another version: not counted done (VERSION_MISMATCH)
        "versionMismatch": mismatched,
        "versionMismatchTotal": mismatched_total,
    }


def _add_paused(
    state: EngineState,
    cluster: ClusterRec,
    *,
    windows: list[tuple[float, str, int]],
    budgets: list[tuple[float, str, int]],
) -> None:
    """Each track of the cluster waiting now: (until, name, track) in `budgets` when its budget holds
    it, else in `windows`."""
    for track in TRACK_INDEXES:
        until = cluster.waiting_until[track]
        if until is None or until <= state.now:
            continue
        ends = _budget_end(state, cluster, track)
        if ends is not None:  # CHK-4: held by its budget, whatever its window does after
            budgets.append((ends, cluster.name, track))
        else:
            windows.append((until, cluster.name, track))


def _paused_lists(windows: list[tuple[float, str, int]], budgets: list[tuple[float, str, int]]) -> dict[str, Any]:
    return {
        # the windows that open first are the ones worth naming
        "pausedWindow": [
            {"cluster": name, "track": TRACKS[track].value, "until": None if math.isinf(until) else until}
            for until, name, track in heapq.nsmallest(NAMES_CAP, windows)
        ],
        "pausedWindowTotal": len(windows),
        # CHK-4: the budgets that end first are the ones worth naming
        "pausedBudget": [
            {"cluster": name, "track": TRACKS[track].value, "until": until}
            for until, name, track in heapq.nsmallest(NAMES_CAP, budgets)
        ],
        "pausedBudgetTotal": len(budgets),
    }


def _budget_end(state: EngineState, cluster: ClusterRec, track: int) -> float | None:
    """When the disruption budget holding the track's upgrade ends; None when none holds it now."""
    target = cluster.target[track]
    if target is None or cluster.upgraded_at is NO_PAIR:
        return None
    ends = budget_end(state, cluster, track, target)
    return ends if ends is not None and ends > state.now else None


def _track_rows(
    rows: list[dict[str, Any]],
    cluster: ClusterRec,
    *,
    values: tuple[_Value | None, _Value | None],
    details: Callable[[ClusterRec, int, _Value], dict[str, Any]],
) -> int:
    """A row (cluster, track, then `details`) per track of the cluster with a value, appended while
    `rows` is under NAMES_CAP; returns how many tracks had one, for the uncapped total."""
    if values is NO_PAIR:
        return 0
    found = 0
    for track in TRACK_INDEXES:
        value = values[track]
        if value is None:
            continue
        found += 1
        if len(rows) < NAMES_CAP:
            rows.append({"cluster": cluster.name, "track": TRACKS[track].value, **details(cluster, track, value)})
    return found


def _mismatch_details(cluster: ClusterRec, track: int, reported: Version) -> dict[str, Any]:
    return {"expected": cluster.versions[track].text, "reported": reported.text}


def _failure_details(cluster: ClusterRec, track: int, error: str) -> dict[str, Any]:
    target = cluster.target[track]
    return {"version": None if target is None else target.text, "error": error}


__all__ = ["NAMES_CAP", "attention", "encode_status", "next_wake_up", "status_document"]
