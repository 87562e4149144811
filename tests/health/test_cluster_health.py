"""The monitor's pure rules: publish on change, stale after silence, never go back in time."""

from __future__ import annotations

from rollout_common.heartbeat import Heartbeat
from rollout_health.cluster_health import ClusterHealth, after_heartbeat, after_silence


def _hb(ready: bool) -> Heartbeat:
    return Heartbeat(cluster="c1", ready=ready, observed_at=0.0, detail=None)


def test_an_older_heartbeat_cannot_undo_a_newer_state() -> None:
    state, _ = after_heartbeat(None, _hb(True), seen_at=10.0)
    again, readiness = after_heartbeat(state, _hb(False), seen_at=5.0)
    assert (again, readiness) == (state, None)


def test_silence_is_announced_once() -> None:
    state = ClusterHealth(ready=True, last_seen=0.0, last_published=True)
    assert after_silence("c1", state, now=29.0, staleness_limit_s=30) == (state, None)
    stale, readiness = after_silence("c1", state, now=31.0, staleness_limit_s=30)
    assert readiness is not None and (readiness.ready, readiness.reason) == (False, "stale: no heartbeat for 31 s")
    assert after_silence("c1", stale, now=99.0, staleness_limit_s=30) == (stale, None)
