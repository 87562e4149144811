"""The planner's configuration: environment variables with the `ROLLOUT_` prefix, or a file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from rollout_common.errors import InvalidInputError


class PlannerSettings(BaseSettings):
    """Every knob of the planner; `ROLLOUT_KAFKA_BOOTSTRAP=...` sets `kafka_bootstrap`, and so on."""

    model_config = SettingsConfigDict(env_prefix="ROLLOUT_", extra="forbid", frozen=True)

    kafka_bootstrap: str = "localhost:9092"
    redis_url: str = "redis://localhost:6379/0"
    redis_namespace: str = Field(default="rollout", description="prefix of every Redis key this planner writes")
    topic_prefix: str = Field(default="", description="put before every catalog topic name (fresh topics in tests)")
    planner_group: str = Field(default="rollout-planner", description="the planner's consumer group")
    source: str = Field(default="rollout-planner", description="ce_source of everything the planner publishes")
    scenario_file: Path | None = Field(
        default=None,
        description="a scenario/fleet file (sequence + clusters) used when no snapshot exists yet; "
        "without it the sequence comes from the store key `sequence` and the fleet from the inventory topic",
    )
    poll_max_records: int = Field(default=500, ge=1)
    poll_timeout_s: float = Field(default=1.0, gt=0)
    time_scale: float = Field(
        default=1.0,
        gt=0,
        description="engine seconds per wall second: 86400 lets a one-day soak pass in one second",
    )
    http_port: int = Field(default=8080, ge=0, le=65535, description="health and metrics port; 0 disables")
    http_host: str = "127.0.0.1"
    create_topics: bool = Field(default=True, description="create the catalog's topics on start if missing")
    replication_factor: int = Field(default=1, ge=1)
    retry_backoff_s: float = Field(default=1.0, gt=0, description="first wait after a transient failure")
    retry_backoff_max_s: float = Field(default=15.0, gt=0)
    sequence_wait_s: float = Field(default=2.0, gt=0, description="how often to look for a sequence to plan")
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
        # The environment wins over a config file (whose values arrive as init arguments), as for
        # the executor: one file can serve several processes that differ in a variable or two.
        return env_settings, init_settings


def load_settings(config_file: Path | None = None) -> PlannerSettings:
    """Settings from a YAML or JSON file when one is given, each overridden by its environment variable."""
    values: dict[str, Any] = {}
    if config_file is not None:
        try:
            raw = yaml.safe_load(config_file.read_text())
        except OSError as exc:
            raise InvalidInputError(f"{config_file}: cannot read: {exc.strerror}") from exc
        except yaml.YAMLError as exc:
            raise InvalidInputError(f"{config_file}: not valid YAML or JSON: {exc}") from exc
        if not isinstance(raw, dict):
            raise InvalidInputError(f"{config_file}: expected a mapping of settings")
        values = raw
    try:
        return PlannerSettings(**values)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise InvalidInputError(f"planner settings: {problems}") from exc


__all__ = ["PlannerSettings", "load_settings"]
