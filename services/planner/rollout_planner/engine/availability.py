"""When a cluster may start an upgrade: maintenance windows and exclusions (WIN-1..3)."""

from __future__ import annotations

from rollout_common.version import Version
from rollout_planner.engine.model import NODES, ClusterRec

_MAX_STEPS = 64


def blocked(cluster: ClusterRec, track: int, version: Version, at: float) -> bool:
    spec = cluster.profile
    window = spec.maintenance_window
    if window is not None and not window.is_open(at):
        return True
    minor_change = version.minor > cluster.versions[track].minor
    return any(e.blocks(at=at, nodes=track == NODES, minor_change=minor_change) for e in spec.exclusions)


def next_start(cluster: ClusterRec, track: int, version: Version, at: float) -> float | None:
    """The earliest instant >= `at` when the upgrade may start; None when that never happens."""
    spec = cluster.profile
    moment = at
    minor_change = version.minor > cluster.versions[track].minor
    for _ in range(_MAX_STEPS):
        if spec.maintenance_window is not None:
            opened = spec.maintenance_window.next_open(moment)
            if opened is None:
                return None
            moment = opened
        ends = [
            e.span[1] for e in spec.exclusions if e.blocks(at=moment, nodes=track == NODES, minor_change=minor_change)
        ]
        if not ends:
            return moment
        moment = max(ends)
    return None
