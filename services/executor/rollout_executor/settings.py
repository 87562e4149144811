"""The executor's configuration: environment variables `ROLLOUT_*`, optionally a YAML file.

Nested sections use `__` in variable names (`ROLLOUT_SIMULATED__TIME_SCALE=0.01`); lists and
maps are JSON (`ROLLOUT_COMMAND__ARGS='["upgrade.py"]'`). The environment wins over the file,
so one file can serve several processes that differ only in a variable or two.
"""

from __future__ import annotations

import os
import socket
import uuid
from enum import Enum
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from rollout_common.errors import InvalidInputError
from rollout_common.status import Track


class DriverKind(str, Enum):
    SIMULATED = "simulated"
    COMMAND = "command"


class SimulatedDriverSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # Seconds per track before `time_scale`; a GKE control plane takes minutes, node pools longer.
    durations_s: dict[Track, float] = Field(default_factory=lambda: {Track.CONTROL_PLANE: 300.0, Track.NODES: 900.0})
    time_scale: float = Field(default=1.0, ge=0.0, description="multiplies every duration")
    failure_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    failing_clusters: frozenset[str] = frozenset()
    seed: int | None = Field(default=None, description="makes the failure draw reproducible")


class CommandDriverSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    executable: str = ""
    args: tuple[str, ...] = ()
    timeout_s: float = Field(default=3600.0, gt=0.0)
    stderr_lines: int = Field(default=5, ge=1, description="how much of stderr a failure carries")


def _default_executor_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class ExecutorSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ROLLOUT_", env_nested_delimiter="__", extra="forbid", frozen=True)

    kafka_bootstrap: str = "localhost:9092"
    kafka_replication_factor: int = Field(default=1, ge=1)
    create_topics: bool = Field(default=True, description="create missing topics at start (idempotent)")
    redis_url: str = "redis://localhost:6379/0"
    redis_namespace: str = "rollout"
    topic_prefix: str = ""
    group_id: str = "rollout-executors"
    executor_id: str = Field(default_factory=_default_executor_id)
    max_concurrent_upgrades: int = Field(default=5, ge=1, description="clusters upgraded at once")
    batch_max_records: int = Field(default=10, ge=1, description="commands taken per poll")
    lease_s: int = Field(default=30, ge=1, description="a dead executor's claim is taken over after 1-2x this")
    shutdown_grace_s: float = Field(default=10.0, ge=0.0)
    driver: DriverKind = DriverKind.SIMULATED
    simulated: SimulatedDriverSettings = Field(default_factory=SimulatedDriverSettings)
    command: CommandDriverSettings = Field(default_factory=CommandDriverSettings)
    metrics_host: str = "0.0.0.0"
    metrics_port: int = Field(default=9464, ge=0, le=65535, description="0 disables the HTTP endpoints")
    log_level: str = "INFO"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Environment first: values from a config file arrive as init arguments and lose to it.
        return env_settings, init_settings


def read_config_file(path: Path | None) -> dict[str, Any]:
    """A YAML mapping of settings, or nothing; a broken file is an InvalidInputError."""
    if path is None:
        return {}
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise InvalidInputError(f"config file {path}: {exc}") from exc
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise InvalidInputError(f"config file {path}: expected a mapping of settings")
    return loaded


def load_settings(config_file: Path | None = None) -> ExecutorSettings:
    return ExecutorSettings(**read_config_file(config_file))
