"""The simulated driver: scaled per-track durations, scripted and drawn failures."""

from __future__ import annotations

import time
from pathlib import Path

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


async def test_the_world_file_keeps_every_completed_upgrade_and_answers_the_probe(tmp_path: Path) -> None:
    world = tmp_path / "world.log"
    driver = SimulatedDriver(
        SimulatedDriverSettings(time_scale=0, world_file=world, failing_clusters=frozenset({"bad"}))
    )
    assert await driver.observed_version(_target("c1")) is None  # nothing known before a first upgrade
    assert (await driver.upgrade(_target("c1"), fencing_token=3)).succeeded
    assert not (await driver.upgrade(_target("bad"), fencing_token=1)).succeeded
    # Another process's driver, later: the world outlives the executor that wrote it.
    later = SimulatedDriver(SimulatedDriverSettings(time_scale=0, world_file=world))
    assert await later.observed_version(_target("c1")) == "1.31.2"
    assert await later.observed_version(_target("c1", Track.CONTROL_PLANE)) is None
    assert await later.observed_version(_target("bad")) is None
    assert world.read_text() == "c1 nodes 1.31.2 3\n"


async def test_without_a_world_file_the_driver_cannot_tell() -> None:
    driver = SimulatedDriver(SimulatedDriverSettings(time_scale=0))
    assert (await driver.upgrade(_target("c1"), fencing_token=1)).succeeded
    assert await driver.observed_version(_target("c1")) is None
