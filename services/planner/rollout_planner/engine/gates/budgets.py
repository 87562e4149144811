"""CHK-4 disruption budgets: a cluster's track is not upgraded again sooner than its stage allows.

A cluster held by its budget gives up its batch slot as one outside its maintenance window does
(WIN-3): it leaves the queue and waits PAUSED with type DISRUPTION_BUDGET until the budget ends
(and then until its window opens, if it has one), when a cluster timer puts it back. It is not
done for GATE-2, so it holds its partition until the forced soak (SOAK-4) like any cluster that
cannot start. Each track's last upgrade is the later of the inventory's `lastUpgrade` and the
upgrades this system performed; the cluster record keeps that one time per track.
"""

from __future__ import annotations

from rollout_common.commands import Wait
from rollout_common.fleet import LastUpgrade
from rollout_common.gates import UpgradeKind
from rollout_common.status import WaitRule
from rollout_common.version import Version
from rollout_common.window import from_epoch
from rollout_planner.engine.availability import next_start
from rollout_planner.engine.model import ClusterRec, EngineState, StageRec, put

NAMES_SHOWN = 20

BudgetWait = tuple[str, str | None, dict[str, object]]


def kind_of(current: Version, target: Version) -> UpgradeKind:
    """An upgrade is `minor` when it changes the minor version, else `patch` (CHK-4)."""
    return UpgradeKind.MINOR if target.minor != current.minor else UpgradeKind.PATCH


def budget_end(state: EngineState, cluster: ClusterRec, track: int, version: Version) -> float | None:
    """When the budget lets the track's upgrade to `version` start; None when no budget applies."""
    last = cluster.upgraded_at[track]
    if last is None or cluster.stage is None:
        return None
    stage = state.stages[cluster.stage]
    interval = stage.spec.upgrade_interval(state.sequence.min_upgrade_interval)
    if interval is None:
        return None
    seconds = interval.seconds(kind_of(cluster.versions[track], version))
    return last + seconds if seconds > 0 else None


def held_by_budget(state: EngineState, cluster: ClusterRec, track: int, version: Version) -> bool:
    end = budget_end(state, cluster, track, version)
    return end is not None and end > state.now


def hold_for_budget(state: EngineState, cluster: ClusterRec, track: int, version: Version) -> bool:
    """The budget holds the upgrade now: note until when and set the timer that lets the cluster back.

    The caller takes it out of the queue. It starts once the budget has ended and its maintenance
    window (or exclusion) allows, so it waits until the first moment both do."""
    end = budget_end(state, cluster, track, version)
    if end is None or end <= state.now:
        return False
    start = next_start(cluster, track, version, end) if _has_window(cluster) else end
    until = start if start is not None else float("inf")
    cluster.waiting_until = put(cluster.waiting_until, track, until)
    state.budget_blocked.append((end, cluster.name))
    if start is not None:
        state.add_cluster_timer(start, name=cluster.name, track=track)
    return True


def _has_window(cluster: ClusterRec) -> bool:
    return cluster.profile.maintenance_window is not None or bool(cluster.profile.exclusions)


def record_upgrade(cluster: ClusterRec, track: int, finished: float) -> None:
    """An upgrade this system performed finished: the track's last upgrade, unless a later one is known."""
    last = cluster.upgraded_at[track]
    if last is None or finished > last:
        cluster.upgraded_at = put(cluster.upgraded_at, track, finished)


def record_inventory(cluster: ClusterRec, last_upgrade: LastUpgrade | None) -> None:
    """The inventory's `lastUpgrade`: taken where it is later than what the record knows."""
    if last_upgrade is None:
        return
    for track, at in enumerate(last_upgrade.epochs()):
        if at is not None:
            record_upgrade(cluster, track, at)


def budget_wait(blocked: list[tuple[float, str]]) -> BudgetWait:
    """STAT-5: which clusters gave up their turn to their budget, and when the first budget ends."""
    blocked.sort()
    return (
        WaitRule.CHK_4_DISRUPTION_BUDGET.value,
        None,
        {"waiting": len(blocked), "until": blocked[0][0], "clusters": [name for _, name in blocked[:NAMES_SHOWN]]},
    )


def budget_message(numbers: dict[str, object]) -> str:
    until = numbers.get("until")
    when = from_epoch(float(until)).isoformat() if isinstance(until, (int, float)) else "?"
    listed = numbers.get("clusters", [])
    names = ", ".join(map(str, listed)) if isinstance(listed, list) else ""
    return (
        f"{numbers['waiting']} cluster(s) were upgraded on this track too recently ({names}); the first "
        f"disruption budget ends at {when} (CHK-4)"
    )


def held_clusters(state: EngineState, stage: StageRec, track: int) -> list[tuple[float, str]]:
    """(budget end, name) of the stage's clusters its budget holds now (scans the stage: status calls only)."""
    out = []
    for name in stage.members:
        cluster = state.clusters[name]
        target = cluster.target[track]
        if target is None or cluster.running[track] is not None or cluster.waiting_until[track] is None:
            continue
        end = budget_end(state, cluster, track, target)
        if end is not None and end > state.now:
            out.append((end, name))
    return sorted(out)


def budget_waits(state: EngineState, stage: StageRec, track: int) -> list[Wait]:
    """STAT-5: the clusters the budget holds and until when the first of them waits (status calls only)."""
    held = held_clusters(state, stage, track)
    if not held:
        return []
    _, _, numbers = budget_wait(held)
    return [
        Wait(
            rule=WaitRule.CHK_4_DISRUPTION_BUDGET.value,
            message=budget_message(numbers),
            numbers=numbers,
            clusters=tuple(name for _, name in held[:NAMES_SHOWN]),
            until=held[0][0],
        )
    ]
