"""The monitor's pure rules: publish on change, stale after silence, never go back in time."""

from __future__ import annotations

import pytest

from rollout_common.heartbeat import Heartbeat
from rollout_health.cluster_health import ClusterHealth, after_heartbeat, after_silence, reported_version
from rollout_health.settings import MonitorSettings


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


def test_reported_versions_are_written_as_the_planner_writes_them() -> None:
    assert [
        reported_version(text)
        for text in (
            "v1.31.13-gke.1023000",
            "v1.31.0",
            "1.31.0",
            "v1.31.0+k3s1",
            "v1.31.4-eks-2d5f260",
            "",
            None,
            "v1.31",
        )
    ] == ["1.31.13-gke.1023000", "1.31.0", "1.31.0", "1.31.0", "1.31.4", None, None, None]


def test_a_heartbeat_that_cannot_read_the_versions_is_no_change() -> None:
    first, readiness = after_heartbeat(
        None, Heartbeat(cluster="c1", ready=True, observed_at=0.0, control_plane_version="v1.31.0"), seen_at=1.0
    )
    assert readiness is not None and readiness.control_plane_version == "1.31.0"
    assert after_heartbeat(first, _hb(True), seen_at=2.0)[1] is None


def test_the_row_expiry_must_exceed_the_staleness_limit() -> None:
    with pytest.raises(ValueError, match=r"row_expiry_s \(90\) must exceed staleness_limit_s \(90\)"):
        MonitorSettings(staleness_limit_s=90, row_expiry_s=90)
