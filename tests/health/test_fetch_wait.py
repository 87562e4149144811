"""The monitor's consumer lets the broker gather heartbeats into a fetch (issue 21): faust's own
asks for a fetch as soon as one record is there."""

from __future__ import annotations

import pytest
from test_monitor_agent import FakeClock, RecordingOutbox, running_monitor

from rollout_adapters.faust_fetch_wait import FetchWait
from rollout_health.settings import MonitorSettings

session_loop = pytest.mark.asyncio(loop_scope="session")


@session_loop
@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (MonitorSettings(), (1024 * 1024, 250)),
        (MonitorSettings(fetch_min_bytes=1, fetch_max_wait_s=1.5), (1, 1500)),
    ],
)
async def test_the_consumer_faust_builds_waits_for_the_configured_batch(
    settings: MonitorSettings, expected: tuple[int, int]
) -> None:
    with running_monitor(settings, RecordingOutbox(), FakeClock(1000.0)) as made:
        assert made.app.fetch_wait == FetchWait(min_bytes=expected[0], max_wait_ms=expected[1])
        thread = made.app.consumer._thread
        consumer = thread._create_worker_consumer(made.app.transport)  # what faust starts on assignment
        try:
            assert (consumer._fetch_min_bytes, consumer._fetch_max_wait_ms) == expected
            assert consumer._group_id == made.app.conf.id  # faust's own settings otherwise
        finally:
            await consumer.stop()


def test_a_fetch_wait_beyond_faust_s_own_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="fetch_max_wait_s"):
        MonitorSettings(fetch_max_wait_s=2.0)


@session_loop
@pytest.mark.parametrize(
    ("settings", "expected_ms"), [(MonitorSettings(), 10_000), (MonitorSettings(metadata_max_age_s=2.5), 2_500)]
)
async def test_the_consumer_reads_the_topics_metadata_again_within_the_setting(
    settings: MonitorSettings, expected_ms: int
) -> None:
    """Chaos seed 4: a worker that joined its group while the broker restarted was assigned no
    partition (the leader's metadata did not list the topics yet) and judged no heartbeat until
    faust's next metadata refresh, 5 minutes later: every rollout stalled on GATE-1. The leader
    now looks again within `metadata_max_age_s`, and a changed topic list makes it rebalance."""
    with running_monitor(settings, RecordingOutbox(), FakeClock(1000.0)) as made:
        consumer = made.app.consumer._thread._create_worker_consumer(made.app.transport)
        try:
            assert consumer._client._metadata_max_age_ms == expected_ms
        finally:
            await consumer.stop()
