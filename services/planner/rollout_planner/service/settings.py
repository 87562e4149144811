"""The planner's configuration: environment variables with the `ROLLOUT_` prefix, or a file.

The Kafka, Redis and loading rules are the shared ones (`rollout_common.connection_settings`).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from rollout_common.connection_settings import RedisServiceSettings, load


class PlannerSettings(RedisServiceSettings):
    """Every knob of the planner; `ROLLOUT_KAFKA_BOOTSTRAP=...` sets `kafka_bootstrap`, and so on."""

    planner_group: str = Field(default="rollout-planner", description="the planner's consumer group")
    group_instance_id: str | None = Field(
        default=None,
        description="static group membership: a restart within the session timeout keeps the partitions "
        "without a rebalance; unique per planner process",
    )
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
    http_host: str = Field(default="0.0.0.0", description="address the health and metrics port binds")
    retry_backoff_s: float = Field(default=1.0, gt=0, description="first wait after a transient failure")
    retry_backoff_max_s: float = Field(default=15.0, gt=0)
    snapshot_every_batches: int = Field(
        default=200, ge=1, description="write a full snapshot after this many journaled batches"
    )
    snapshot_interval_s: float = Field(
        default=30.0, gt=0, description="...or after this many seconds, whichever comes first"
    )
    status_interval_s: float = Field(
        default=1.0, ge=0, description="rewrite the status document at most this often (state changes: at once)"
    )
    sequence_wait_s: float = Field(default=2.0, gt=0, description="how often to look for a sequence to plan")
    lease_ttl_s: float = Field(
        default=10.0,
        ge=1.0,
        description="one planner at a time (BUS-8): the active planner's lease lasts this long unless renewed "
        "(every third of it); a standby takes over within lease_ttl_s + lease_retry_s of the last renewal",
    )
    lease_retry_s: float = Field(default=1.0, gt=0, description="how often a standby planner tries to take the lease")


def load_settings(config_file: Path | None = None) -> PlannerSettings:
    """Settings from a YAML or JSON file when one is given, each overridden by its environment variable."""
    return load(PlannerSettings, config_file, what="planner settings")


__all__ = ["PlannerSettings", "load_settings"]
