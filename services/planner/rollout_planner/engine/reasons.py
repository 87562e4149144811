"""Turning the dispatcher's wait records into sentences with numbers and names (STAT-5)."""

from __future__ import annotations

from rollout_common.commands import Wait
from rollout_common.status import StageReason, WaitRule
from rollout_common.window import from_epoch
from rollout_planner.engine.model import EngineState, StageRec

_NAMES_SHOWN = 20
_CHECK_HALTS = (StageReason.CHECK_FAILED.value, StageReason.CHECK_INCONCLUSIVE.value)


def describe_waits(state: EngineState, stage: StageRec, track: int, *, with_clusters: bool = False) -> list[Wait]:
    waits = []
    for rule, partition, numbers in stage.waits[track]:
        clusters: tuple[str, ...] = ()
        if with_clusters and rule == WaitRule.GATE_1_MAX_UNAVAILABLE.value and partition is not None:
            clusters = _unavailable_in(state, stage, partition)
        until: float | None = None
        if rule == WaitRule.WIN_MAINTENANCE.value:
            names = numbers.get("clusters", [])
            clusters = tuple(str(n) for n in names) if isinstance(names, list) else ()
            opens = numbers.get("nextOpen")
            until = float(opens) if isinstance(opens, (int, float)) else None
        waits.append(
            Wait(
                rule=rule,
                message=_message(rule, partition, numbers),
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


def _message(rule: str, partition: str | None, numbers: dict[str, object]) -> str:
    if rule == WaitRule.GATE_1_MAX_UNAVAILABLE.value:
        return (
            f"partition {partition}: {numbers['unavailable']} clusters unavailable, maxUnavailable is "
            f"{numbers['maxUnavailable']}; the next batch waits until fewer are unavailable (GATE-1)"
        )
    if rule == WaitRule.GATE_3_MAX_UNAVAILABLE_PARTITIONS.value:
        listed = numbers.get("partitions", [])
        held = ", ".join(map(str, listed)) if isinstance(listed, list) else ""
        return (
            f"{numbers['notReadyPartitions']} earlier partition(s) NotReady "
            f"({held}) > maxUnavailablePartitions "
            f"{numbers['maxUnavailablePartitions']}; partition {partition} and later ones wait (GATE-3)"
        )
    if rule == WaitRule.GATE_6_MAX_CONCURRENT.value:
        return f"{numbers['inFlight']} clusters upgrading, maxConcurrent is {numbers['maxConcurrent']} (GATE-6)"
    if rule == WaitRule.WIN_MAINTENANCE.value:
        opens = numbers.get("nextOpen")
        when = from_epoch(float(opens)).isoformat() if isinstance(opens, (int, float)) else "never"
        listed = numbers.get("clusters", [])
        names = ", ".join(map(str, listed)) if isinstance(listed, list) else ""
        return (
            f"{numbers['waiting']} cluster(s) outside their maintenance window or inside an exclusion "
            f"({names}); the first can start at {when} (WIN-1..4)"
        )
    if rule == WaitRule.SOAK_2_PARTITIONS_NOT_READY.value:
        listed = numbers.get("partitions", [])
        names = ", ".join(map(str, listed)) if isinstance(listed, list) else ""
        return (
            f"every eligible cluster is upgraded, but partitions {names} are NotReady; "
            "the soak starts when they are Ready (SOAK-2)"
        )
    if rule == WaitRule.SOAK_2_SOAKING.value:
        at = numbers.get("forcedSoakAt")
        when = from_epoch(float(at)).isoformat() if isinstance(at, (int, float)) else "?"
        return (
            f"{numbers['remaining']} cluster(s) still to upgrade cannot start now (failed, deprecated API, "
            f"or waiting for a window or their control plane); the stage soaks anyway at {when} (SOAK-4)"
        )
    if rule == WaitRule.CHK_2_CHECK.value:
        return f"rollout {numbers.get('rollout')} waits for {numbers.get('text')} (CHK-2)"
    if rule == WaitRule.OPS_1_PAUSED.value and numbers.get("reason") in _CHECK_HALTS:
        return (
            f"halted by a metric check ({numbers.get('reason')}); no new batches, nothing qualified until the "
            "rollout is resumed (CHK-2, OPS-1)"
        )
    if rule == WaitRule.OPS_1_PAUSED.value:
        return f"rollout paused ({numbers.get('reason')}); no new batches (OPS-1)"
    return rule


def window_waits(state: EngineState, stage: StageRec, track: int) -> list[Wait]:
    """WIN-4: per waiting cluster, when its next window opens (scans the stage: status calls only)."""
    waiting = []
    for name in stage.members:
        until = state.clusters[name].waiting_until[track]
        if until is not None and until > state.now:
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
