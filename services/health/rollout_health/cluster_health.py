"""What the monitor knows about one cluster, and the two ways it changes (pure functions).

A Readiness is published only when what was last published for the cluster changes: a
heartbeat that flips `ready`, one that reports another version running (control plane or oldest
kubelet), or silence longer than the staleness limit (not ready, "stale"). After a stale spell,
the first heartbeat saying ready publishes ready again.
"""

from __future__ import annotations

import re
import zlib

from pydantic import BaseModel, ConfigDict

from rollout_common.events import Readiness
from rollout_common.heartbeat import Heartbeat


class ClusterHealth(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    ready: bool
    last_seen: float  # epoch seconds when the last heartbeat was observed (its observedAt)
    last_published: bool | None = None  # the `ready` last published; None before the first
    published_observed_at: float | None = None  # the observation time of what was last published
    # the versions last published (absent in rows written before readiness carried them)
    control_plane_version: str | None = None
    node_version: str | None = None

    @property
    def evidence_at(self) -> float | None:
        """The newest observation of what was last published, for a repeat of it (BUS-7).

        A cluster that stayed ready through an upgrade publishes no change, so a repeat stamped with
        its last change would predate the upgrade's result and the planner would never count it
        ready again; the newest heartbeat that agrees is the right time. A stale mark has only
        the silence as evidence.
        """
        return self.last_seen if self.ready == self.last_published else self.published_observed_at


# Kubernetes spells a version `v1.31.13-gke.1023000`, `v1.31.0` or `v1.31.0+k3s1`; the planner
# compares ours. A build suffix other than GKE's is not part of our versions, so it is dropped.
_REPORTED = re.compile(r"v?([0-9]+\.[0-9]+\.[0-9]+(?:-gke\.[0-9]+)?)(?:[+-][0-9A-Za-z.+-]*)?")


def reported_version(text: str | None) -> str | None:
    """A version a cluster reports, as the planner writes it; None when it is not one (unknown)."""
    match = _REPORTED.fullmatch(text.strip()) if text else None
    return match.group(1) if match else None


def changes_nothing(previous: ClusterHealth, heartbeat: Heartbeat) -> bool:
    """The heartbeat says what the row says and what was published (a fleet at rest): only its time
    is news, which the monitor keeps in memory (`after_heartbeat` would give the same row and no
    readiness, at many times the cost)."""
    if heartbeat.ready != previous.ready or previous.last_published != heartbeat.ready:
        return False
    for text, known in (
        (heartbeat.control_plane_version, previous.control_plane_version),
        (heartbeat.node_version, previous.node_version),
    ):
        if text is not None and reported_version(text) not in (None, known):
            return False
    return True


def name_hash(cluster: str) -> int:
    """A number from the cluster's name, the same in every worker and after every restart (Python's
    own `hash` of a str is not): what spreads clusters over republish turns and checkpoint marks."""
    return zlib.crc32(cluster.encode())


def checkpoint_due(cluster: str, *, row_seen: float, seen_at: float, interval_s: float) -> bool:
    """Whether a heartbeat that changes nothing, seen at `seen_at`, writes its cluster's row (whose
    time is `row_seen`): once per `interval_s`, the first time the heartbeats pass the cluster's own
    mark in the interval (a phase from its name), not `interval_s` after the row's time. Rows written
    in one burst (a fleet first heard at once: the monitor's start, a takeover, the broker's return)
    are then checkpointed spread over the interval instead of in the same burst again each interval.
    The row's time still never lags the cluster's newest heartbeat by `interval_s` or more, which
    a takeover's grace relies on (`after_silence`)."""
    phase = name_hash(cluster) / 2**32 * interval_s
    return (seen_at + phase) // interval_s > (row_seen + phase) // interval_s


def after_heartbeat(
    previous: ClusterHealth | None, heartbeat: Heartbeat, *, seen_at: float
) -> tuple[ClusterHealth, Readiness | None]:
    if previous is not None and seen_at < previous.last_seen:
        # Older than what we have (a producer's clock went back): it must not undo a newer state.
        return previous, None
    reported = (reported_version(heartbeat.control_plane_version), reported_version(heartbeat.node_version))
    was = (None, None) if previous is None else (previous.control_plane_version, previous.node_version)
    state = ClusterHealth(
        ready=heartbeat.ready,
        last_seen=seen_at,
        last_published=None if previous is None else previous.last_published,
        published_observed_at=None if previous is None else previous.published_observed_at,
        control_plane_version=was[0],
        node_version=was[1],
    )
    # A version the probe could not read this time is unknown, not changed: only a version
    # reported and different is news (an upgrade landing, or not landing, on the cluster).
    versions_changed = any(new is not None and new != old for new, old in zip(reported, was, strict=True))
    if state.last_published == heartbeat.ready and not versions_changed:
        return state, None
    return _published(state, heartbeat, reported=reported, seen_at=seen_at)


def _published(
    state: ClusterHealth, heartbeat: Heartbeat, *, reported: tuple[str | None, str | None], seen_at: float
) -> tuple[ClusterHealth, Readiness]:
    """The readiness a heartbeat's news publishes, and the row that records it as published."""
    reason = heartbeat.detail or ("reported ready" if heartbeat.ready else "reported not ready")
    readiness = Readiness(
        cluster=heartbeat.cluster,
        ready=heartbeat.ready,
        reason=reason,
        observed_at=seen_at,
        control_plane_version=reported[0],
        node_version=reported[1],
    )
    published = {
        "last_published": heartbeat.ready,
        "published_observed_at": seen_at,
        "control_plane_version": reported[0] or state.control_plane_version,
        "node_version": reported[1] or state.node_version,
    }
    return state.model_copy(update=published), readiness


def after_silence(
    cluster: str, state: ClusterHealth, *, now: float, staleness_limit_s: float, grace_s: float = 0.0
) -> tuple[ClusterHealth, Readiness | None]:
    """Stale once silent for the limit, plus `grace_s` when heartbeats after `last_seen` may have
    been seen by another worker and not recorded (a row is checkpointed, not written per heartbeat)."""
    silent_s = now - state.last_seen
    if silent_s < staleness_limit_s + grace_s or state.last_published is False:
        return state, None
    # Observed now: the silence itself is the observation, newer than any heartbeat before it.
    readiness = Readiness(
        cluster=cluster, ready=False, reason=f"stale: no heartbeat for {silent_s:.0f} s", observed_at=now
    )
    # a stale mark carries no versions: its repeats must not pass old ones off as observed now
    update: dict[str, object] = {"last_published": False, "published_observed_at": now}
    update |= {"control_plane_version": None, "node_version": None}
    return state.model_copy(update=update), readiness
