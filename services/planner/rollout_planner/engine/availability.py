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


def next_block(cluster: ClusterRec, track: int, version: Version, at: float) -> float | None:
    """The first instant after `at` at which a cluster that may start the upgrade at `at` no longer
    may: its window closes or an exclusion begins. None when neither ever happens."""
    spec = cluster.profile
    minor_change = version.minor > cluster.versions[track].minor
    moments = [
        e.span[0]
        for e in spec.exclusions
        if e.span[0] > at and e.blocks(at=e.span[0], nodes=track == NODES, minor_change=minor_change)
    ]
    if spec.maintenance_window is not None and (closes := spec.maintenance_window.closes(at)) is not None:
        moments.append(closes)
    return min(moments, default=None)
