"""Which version a cluster should go to next on a track (VER-1, VER-4..7, VER-6a, SOAK-1)."""

from __future__ import annotations

from rollout_common.version import Version
from rollout_planner.engine.model import CP, ClusterRec, EngineState, Offer, StageRec


def offered_versions(offer: Offer, cluster: ClusterRec, track: int) -> list[Version]:
    """What one offer holds for this cluster, before the version rules are applied."""
    if offer.version is not None and not offer.on_demand:
        return [offer.version]
    if offer.version is not None:
        wanted = offer.version.minor
        cp_minor = cluster.versions[CP].minor
        # VER-6a: a cluster on V's minor or the minor below it
        if track == CP and cp_minor != wanted and cp_minor.next() != wanted:
            return []
        return [offer.version]
    by_minor = offer.by_minor or {}
    if track == CP:
        # VER-1: the first stage takes the target of the cluster's own current minor
        found = by_minor.get(cluster.versions[CP].minor)
        return [] if found is None else [found]
    return list(by_minor.values())


def allowed(cluster: ClusterRec, track: int, version: Version, planned_cp: Version) -> bool:
    """VER-6: control plane at most one minor up; nodes never above the control plane; no downgrade,
    neither below the version it runs nor below a higher one it ran before the inventory lowered it."""
    current, floor = cluster.versions[track], cluster.floor[track]
    if version <= current or (floor is not None and version < floor):
        return False
    if track == CP:
        return version.minor <= current.minor.next()
    return version <= planned_cp


def best_target(state: EngineState, stage: StageRec, cluster: ClusterRec, track: int) -> tuple[Version, str] | None:
    """The newest eligible offered version and the rollout that offered it first."""
    planned_cp = cluster.versions[CP]
    if track != CP:
        cp_target = cluster.running[CP] or cluster.target[CP]
        if cp_target is not None and cp_target > planned_cp:
            planned_cp = cp_target
    best: tuple[Version, str] | None = None
    for offer in stage.offers(track):
        rollout = state.rollouts[offer.rollout_id]
        if offer.rollout_id in cluster.done_by[track] or track not in rollout.tracks:
            continue
        for version in offered_versions(offer, cluster, track):
            if allowed(cluster, track, version, planned_cp) and (best is None or version > best[0]):
                best = (version, offer.rollout_id)
    return best


def would_take(offer: Offer, cluster: ClusterRec, track: int, *, upgrades_cp: bool) -> bool:
    """Whether this offer alone would upgrade the cluster (used to tell SUPERSEDED from STUCK).

    Nodes never go above their control plane (VER-6): above the version it runs only as far as this
    offer may take the control plane itself, which a rollout without the control-plane track never
    does (`upgrades_cp`). A node version no control plane of the stage may reach is no one's (VER-5)."""
    if offer.rollout_id in cluster.done_by[track]:
        return False
    planned_cp = cluster.versions[CP]
    if track != CP and upgrades_cp:
        reachable = [v for v in offered_versions(offer, cluster, CP) if allowed(cluster, CP, v, planned_cp)]
        planned_cp = max([planned_cp, *reachable])
    return any(allowed(cluster, track, v, planned_cp) for v in offered_versions(offer, cluster, track))


def on_offered(offer: Offer, cluster: ClusterRec, track: int) -> bool:
    """The cluster already runs a version this offer holds for it (eligible, nothing to do)."""
    return cluster.versions[track] in offered_versions(offer, cluster, track)
