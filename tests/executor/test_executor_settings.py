"""Settings come from ROLLOUT_* variables and an optional YAML file; the environment wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollout_common.errors import InvalidInputError
from rollout_common.status import Track
from rollout_executor.drivers import CommandDriver, SimulatedDriver, build_driver
from rollout_executor.settings import DriverKind, load_settings, poll_interval_s


def test_environment_overrides_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "executor.yaml"
    config.write_text("group_id: from-file\nmax_concurrent_upgrades: 3\nsimulated:\n  time_scale: 0.5\n")
    monkeypatch.setenv("ROLLOUT_GROUP_ID", "from-env")
    monkeypatch.setenv("ROLLOUT_SIMULATED__FAILING_CLUSTERS", '["c9"]')
    settings = load_settings(config)
    assert settings.group_id == "from-env"
    assert settings.max_concurrent_upgrades == 3
    assert settings.simulated.time_scale == 0.5
    assert settings.simulated.failing_clusters == {"c9"}
    assert settings.simulated.durations_s[Track.NODES] > 0
    assert isinstance(build_driver(settings), SimulatedDriver)


def test_the_command_driver_is_chosen_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROLLOUT_DRIVER", "command")
    monkeypatch.setenv("ROLLOUT_COMMAND__EXECUTABLE", "upgrade-cluster")
    monkeypatch.setenv("ROLLOUT_COMMAND__ARGS", '["--wait"]')
    settings = load_settings()
    assert settings.driver is DriverKind.COMMAND
    assert settings.command.args == ("--wait",)
    assert isinstance(build_driver(settings), CommandDriver)


def test_unknown_settings_are_refused(tmp_path: Path) -> None:
    config = tmp_path / "executor.yaml"
    config.write_text("concurency: 3\n")
    # One line naming the field, never a pydantic dump (whose input values could be secrets).
    with pytest.raises(InvalidInputError, match="concurency"):
        load_settings(config)


def test_the_poll_interval_covers_the_longest_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROLLOUT_DRIVER", "command")
    monkeypatch.setenv("ROLLOUT_COMMAND__EXECUTABLE", "upgrade-cluster")
    monkeypatch.setenv("ROLLOUT_COMMAND__TIMEOUT_S", "3600")
    monkeypatch.setenv("ROLLOUT_BATCH_MAX_RECORDS", "10")
    monkeypatch.setenv("ROLLOUT_MAX_CONCURRENT_UPGRADES", "5")
    monkeypatch.setenv("ROLLOUT_MAX_CLUSTERS_PER_COMMAND", "8")
    # The semaphore is per cluster: 10 commands x 8 clusters, 5 at a time, is 16 rounds of
    # hour-long upgrades (not the 2 rounds counting commands gave), with a margin.
    assert poll_interval_s(load_settings()) == 16 * 3600 * 1.5 + 60
    monkeypatch.setenv("ROLLOUT_MAX_POLL_INTERVAL_S", "900")
    assert poll_interval_s(load_settings()) == 900


def test_the_probe_settings_are_read_and_checked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert load_settings().probe_before_rerun is True
    monkeypatch.setenv("ROLLOUT_PROBE_BEFORE_RERUN", "false")
    monkeypatch.setenv("ROLLOUT_COMMAND__PROBE", '["running-version", "--json"]')
    monkeypatch.setenv("ROLLOUT_SIMULATED__WORLD_FILE", str(tmp_path / "world.log"))
    settings = load_settings()
    assert settings.probe_before_rerun is False
    assert settings.command.probe == ("running-version", "--json")
    assert settings.simulated.world_file == tmp_path / "world.log"
    monkeypatch.setenv("ROLLOUT_COMMAND__PROBE", '[" ", "--json"]')
    monkeypatch.setenv("ROLLOUT_COMMAND__PROBE_TIMEOUT_S", "0")
    with pytest.raises(InvalidInputError) as refused:
        load_settings()
    assert str(refused.value) == (
        "executor settings: command.probe: Value error, the first item must name the probe program; "
        "command.probe_timeout_s: Input should be greater than 0"
    )
