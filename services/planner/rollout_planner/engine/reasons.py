"""Turning the dispatcher's wait records into sentences with numbers and names (STAT-5)."""

from __future__ import annotations

from rollout_common.commands import Wait
from rollout_common.status import WaitRule
from rollout_common.window import from_epoch
from rollout_planner.engine.gates.budgets import held_by_budget
from rollout_planner.engine.model import EngineState, StageRec
from rollout_planner.engine.wait_messages import wait_message

_NAMES_SHOWN = 20


def describe_waits(state: EngineState, stage: StageRec, track: int, *, with_clusters: bool = False) -> list[Wait]:
    waits = []
    for rule, partition, numbers in stage.waits[track]:
        clusters: tuple[str, ...] = ()
        if with_clusters and rule == WaitRule.GATE_1_MAX_UNAVAILABLE.value and partition is not None:
            clusters = _unavailable_in(state, stage, partition)
        until: float | None = None
        if rule in (WaitRule.WIN_MAINTENANCE.value, WaitRule.CHK_4_DISRUPTION_BUDGET.value):
            names = numbers.get("clusters", [])
            clusters = tuple(str(n) for n in names) if isinstance(names, list) else ()
            opens = numbers.get("nextOpen", numbers.get("until"))
            until = float(opens) if isinstance(opens, (int, float)) and opens != float("inf") else None
        waits.append(
            Wait(
                rule=rule,
                message=wait_message(rule, partition, numbers),
                partition=partition,
                numbers=dict(numbers),
                clusters=clusters,
                until=until,
            )
        )
    return waits


def _unavailable_in(state: EngineState, stage: StageRec, partition_name: str) -> tuple[str, ...]:
    for partition in stage.partitions:
        if partition.name == partition_name:
            names = [n for n in partition.members if not state.clusters[n].available]
            return tuple(names[:_NAMES_SHOWN])
    return ()


def window_waits(state: EngineState, stage: StageRec, track: int) -> list[Wait]:
    """WIN-4: per waiting cluster, when its next window opens (scans the stage: status calls only)."""
    waiting = []
    for name in stage.members:
        cluster = state.clusters[name]
        until, target = cluster.waiting_until[track], cluster.target[track]
        if until is not None and until > state.now:
            if target is not None and held_by_budget(state, cluster, track, target):
                continue  # CHK-4 says when its budget ends
            waiting.append((until, name))
    if not waiting:
        return []
    waiting.sort()
    first = waiting[0][0]
    text = "never" if first == float("inf") else from_epoch(first).isoformat()
    return [
        Wait(
            rule=WaitRule.WIN_MAINTENANCE.value,
            message=f"{len(waiting)} cluster(s) wait for a maintenance window or exclusion to end; "
            f"the next opens at {text} (WIN-1..4)",
            numbers={"waiting": len(waiting)},
            clusters=tuple(n for _, n in waiting[:_NAMES_SHOWN]),
            until=None if first == float("inf") else first,
        )
    ]
