"""The clusters a person must look at, one row each, for the web dashboard's paged filter.

The status document names at most `NAMES_CAP` clusters per list; the dashboard filters the whole
list on the server instead, so this walks the fleet once (STAT-1 per cluster) and keeps the rows
that need attention: failed upgrades, offline clusters (not ready without an upgrade to explain
it: none running, none just finished), ineligible ones and paused ones (window, deprecated APIs, user).
"""

from __future__ import annotations

from rollout_adapters.web_dashboard import ClusterRow
from rollout_common.status import ClusterStatus
from rollout_planner.engine.model import ClusterRec, EngineState
from rollout_planner.engine.views import cluster_status

_KIND_OF_STATUS = {
    ClusterStatus.FAILED: "FAILED",
    ClusterStatus.INELIGIBLE: "INELIGIBLE",
    ClusterStatus.PAUSED: "PAUSED",
}


def attention_rows(state: EngineState) -> list[ClusterRow]:
    rows = [row for cluster in state.clusters.values() if (row := _row(state, cluster)) is not None]
    rows.sort(key=lambda row: row.name)
    return rows


def _row(state: EngineState, cluster: ClusterRec) -> ClusterRow | None:
    status, detail = cluster_status(state, cluster)
    # not ready with no upgrade to explain it: neither running one nor waiting to report ready after one
    offline = not cluster.ready and not cluster.awaiting_ready and not cluster.busy
    kind = _KIND_OF_STATUS.get(status) or ("OFFLINE" if offline else None)
    if kind is None:
        return None
    if offline and kind != "OFFLINE":
        detail = f"{detail or status.value}; offline (reported not ready)"
    elif kind == "OFFLINE":
        detail = "reported not ready with no upgrade under way"
    stage = None if cluster.stage is None else state.stages[cluster.stage]
    partition = None
    if stage is not None and cluster.partition is not None:
        partition = stage.partitions[cluster.partition].name
    return ClusterRow(
        name=cluster.name,
        kind=kind,
        status=status.value,
        detail=detail or status.value,
        stage=None if stage is None else stage.spec.name,
        partition=partition,
        labels=cluster.profile.labels,
    )


__all__ = ["attention_rows"]
