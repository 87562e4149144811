"""Notices about clusters the engine does not know: each name said at most once per period.

A readiness event or an upgrade result naming a cluster the inventory does not have is answered
with an `UNKNOWN_CLUSTER` notice. A health monitor republishes readiness for every cluster it has a
row for, every republish interval, so a few hundred made-up names became thousands of notices on
the progress topic, without end. Every such event is counted (`UnknownClusters.events`), and at most
one notice per name per `interval_s` goes out, saying how many events it stands for. Beyond
`max_names` names in one period, the others are summed up in one notice per period.

What was said is part of the state and its snapshot: a restarted planner does not say again a name
it said within the period.
"""

from __future__ import annotations

from rollout_common.commands import Notice
from rollout_planner.engine.model import EngineState, UnknownClusters, UnknownName

UNKNOWN_CLUSTER = "UNKNOWN_CLUSTER"


def unknown_cluster(state: EngineState, *, name: str, message: str) -> None:
    """An event about `name`, which the engine does not know: counted, and said unless said lately."""
    unknown = state.unknown
    unknown.events += 1
    now, interval = state.now, unknown.interval_s
    said = unknown.said.get(name)
    if said is not None and now - said.at < interval:
        said.held += 1
        return
    if said is None and len(unknown.said) >= unknown.max_names and not _forget_expired(unknown, now=now):
        unknown.overflow += 1
        return
    held = 0 if said is None else said.held
    unknown.said[name] = UnknownName(at=now)
    more = f"; {held} more since its last notice" if held else ""
    every = f"said at most once per {interval:g} s per cluster{more}"
    state.emit(Notice(code=UNKNOWN_CLUSTER, cluster=name, message=f"{message} ({every})"))


def sum_up_unknown(state: EngineState) -> None:
    """At the end of a decision: the names beyond the bound in one notice (once per period), and
    the names whose period is over forgotten (looked for once per period)."""
    unknown, now = state.unknown, state.now
    if unknown.pruned_at is None or now - unknown.pruned_at >= unknown.interval_s:
        unknown.pruned_at = now
        _forget_expired(unknown, now=now)
    if not unknown.overflow:
        return
    if unknown.summary_at is not None and now - unknown.summary_at < unknown.interval_s:
        return
    count, unknown.overflow, unknown.summary_at = unknown.overflow, 0, now
    state.emit(
        Notice(
            code=UNKNOWN_CLUSTER,
            message=f"{count} readiness events or results about unknown clusters beyond the {unknown.max_names} "
            f"named in the last {unknown.interval_s:g} s (said at most once per {unknown.interval_s:g} s)",
        )
    )


def _forget_expired(unknown: UnknownClusters, *, now: float) -> bool:
    """Drop the names whose period is over, but keep for one more period those with events held
    back (their next notice says how many); True when there is room for another name."""
    interval = unknown.interval_s
    expired = [
        name
        for name, said in unknown.said.items()
        if now - said.at >= 2 * interval or (now - said.at >= interval and not said.held)
    ]
    for name in expired:
        del unknown.said[name]
    return len(unknown.said) < unknown.max_names


__all__ = ["UNKNOWN_CLUSTER", "sum_up_unknown", "unknown_cluster"]
