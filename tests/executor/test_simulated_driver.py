"""The simulated driver: scaled per-track durations, scripted and drawn failures."""

from __future__ import annotations

import time

import pytest

from rollout_common.status import Track
from rollout_executor.drivers.simulated import SimulatedDriver
from rollout_executor.settings import SimulatedDriverSettings
from rollout_executor.target import UpgradeTarget

# One loop for the whole session, as the async fixtures use (pyproject).
pytestmark = pytest.mark.asyncio(loop_scope="session")


def _target(cluster: str, track: Track = Track.NODES) -> UpgradeTarget:
    return UpgradeTarget(cluster=cluster, track=track, version="1.31.2")


async def test_durations_are_per_track_and_scaled() -> None:
    settings = SimulatedDriverSettings(durations_s={Track.CONTROL_PLANE: 1.0, Track.NODES: 20.0}, time_scale=0.01)
    driver = SimulatedDriver(settings)
    started = time.monotonic()
    assert (await driver.upgrade(_target("c1", Track.NODES), fencing_token=1)).succeeded
    assert 0.15 < time.monotonic() - started < 1.0


async def test_failing_clusters_and_failure_rate() -> None:
    scripted = SimulatedDriver(SimulatedDriverSettings(time_scale=0, failing_clusters=frozenset({"bad"})))
    assert not (await scripted.upgrade(_target("bad"), fencing_token=1)).succeeded
    assert (await scripted.upgrade(_target("good"), fencing_token=1)).succeeded
    always = SimulatedDriver(SimulatedDriverSettings(time_scale=0, failure_rate=1.0, seed=7))
    outcome = await always.upgrade(_target("good"), fencing_token=1)
    assert (outcome.succeeded, outcome.error) == (False, "simulated failure (failure_rate)")
