"""What the monitor knows about one cluster, and the two ways it changes (pure functions).

A Readiness is published only when what was last published for the cluster changes: a
heartbeat that flips `ready`, or silence longer than the staleness limit (not ready, "stale").
After a stale spell, the first heartbeat saying ready publishes ready again.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from rollout_common.events import Readiness
from rollout_common.heartbeat import Heartbeat


class ClusterHealth(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    ready: bool
    last_seen: float  # epoch seconds when the last heartbeat was observed (its observedAt)
    last_published: bool | None = None  # the `ready` last published; None before the first
    published_observed_at: float | None = None  # the observation time of what was last published

    @property
    def evidence_at(self) -> float | None:
        """The newest observation of what was last published, for a repeat of it (BUS-7).

        A cluster that stayed ready through an upgrade publishes no change, so a repeat stamped with
        its last change would predate the upgrade's result and the planner would never count it
        ready again; the newest heartbeat that agrees is the right time. A stale mark has only
        the silence as evidence.
        """
        return self.last_seen if self.ready == self.last_published else self.published_observed_at


def after_heartbeat(
    previous: ClusterHealth | None, heartbeat: Heartbeat, *, seen_at: float
) -> tuple[ClusterHealth, Readiness | None]:
    if previous is not None and seen_at < previous.last_seen:
        # Older than what we have (a producer's clock went back): it must not undo a newer state.
        return previous, None
    state = ClusterHealth(
        ready=heartbeat.ready,
        last_seen=seen_at,
        last_published=None if previous is None else previous.last_published,
        published_observed_at=None if previous is None else previous.published_observed_at,
    )
    if state.last_published == heartbeat.ready:
        return state, None
    reason = heartbeat.detail or ("reported ready" if heartbeat.ready else "reported not ready")
    readiness = Readiness(cluster=heartbeat.cluster, ready=heartbeat.ready, reason=reason, observed_at=seen_at)
    return state.model_copy(update={"last_published": heartbeat.ready, "published_observed_at": seen_at}), readiness


def after_silence(
    cluster: str, state: ClusterHealth, *, now: float, staleness_limit_s: float
) -> tuple[ClusterHealth, Readiness | None]:
    silent_s = now - state.last_seen
    if silent_s < staleness_limit_s or state.last_published is False:
        return state, None
    # Observed now: the silence itself is the observation, newer than any heartbeat before it.
    readiness = Readiness(
        cluster=cluster, ready=False, reason=f"stale: no heartbeat for {silent_s:.0f} s", observed_at=now
    )
    return state.model_copy(update={"last_published": False, "published_observed_at": now}), readiness
