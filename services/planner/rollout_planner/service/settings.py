"""The planner's configuration: environment variables with the `ROLLOUT_` prefix, or a file.

The Kafka, Redis and loading rules are the shared ones (`rollout_common.connection_settings`).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr

from rollout_common.connection_settings import RedisServiceSettings, load
from rollout_common.epoch import MAX_FUTURE_SKEW_S


class PlannerSettings(RedisServiceSettings):
    """Every knob of the planner; `ROLLOUT_KAFKA_BOOTSTRAP=...` sets `kafka_bootstrap`, and so on."""

    planner_group: str = Field(
        default="rollout-planner", description="the planner's consumer group (under the topic prefix)"
    )
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
    kafka_fetch_max_wait_ms: int = Field(
        default=100,
        ge=10,
        le=10_000,
        description="how long the broker may hold the planner's fetch while the partitions in it have nothing new: "
        "a backlog on readiness waits this long for each refill while the other topics are idle (aiokafka's "
        "500 cost a fifth of a catch-up's time); an idle planner sends 1000/this empty fetches a second, "
        "hence the floor of 10; the ceiling stays well inside the client's 40 s request timeout",
    )
    poll_timeout_s: float = Field(default=1.0, gt=0)
    time_scale: float = Field(
        default=1.0,
        gt=0,
        description="engine seconds per wall second: 86400 lets a one-day soak pass in one second",
    )
    max_future_skew_s: float = Field(
        default=MAX_FUTURE_SKEW_S,
        ge=0.0,
        description="a readiness observation or upgrade result timed more than this ahead of the planner's clock "
        "is dead-lettered (BUS-7): it would make every later observation of the cluster look older",
    )
    unknown_notice_interval_s: float = Field(
        default=3600.0,
        gt=0.0,
        description="an UNKNOWN_CLUSTER notice (readiness or a result for a cluster the inventory does not have) "
        "goes out at most once per cluster per this many seconds; every such event is counted in "
        "rollout_planner_unknown_cluster_events",
    )
    http_port: int = Field(default=8080, ge=0, le=65535, description="health and metrics port; 0 disables")
    http_host: str = Field(default="0.0.0.0", description="address the health and metrics port binds")
    dashboard_port: int = Field(
        default=0, ge=0, le=65535, description="read-only web dashboard port, such as 8090 (docs/dashboard.md); 0: none"
    )
    dashboard_host: str = Field(
        default="127.0.0.1", description="address the dashboard binds: this machine only unless set"
    )
    dashboard_token: SecretStr | None = Field(
        default=None, description="secret: when set, the dashboard wants `Authorization: Bearer <token>`"
    )
    dashboard_username: str | None = Field(default=None, description="user of the dashboard's basic auth")
    dashboard_password: SecretStr | None = Field(
        default=None, description="secret: when set, the dashboard wants basic auth with this user and password"
    )
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
    shutdown_grace_s: float = Field(
        default=10.0,
        gt=0,
        description="after SIGTERM, how long the batch in hand and the stop snapshot may take before the planner "
        "is cancelled (a store or broker that is down must not hold the process)",
    )
    lease_ttl_s: float = Field(
        default=10.0,
        ge=1.0,
        description="one planner at a time (BUS-8): the active planner's lease lasts this long unless renewed "
        "(every third of it); a standby takes over within lease_ttl_s + lease_retry_s of the last renewal",
    )
    lease_retry_s: float = Field(default=1.0, gt=0, description="how often a standby planner tries to take the lease")
    lease_max_stall_s: float = Field(
        default=120.0,
        gt=0,
        description="the active planner renews its lease from a thread of its own while one long step holds its "
        "loop (a large fleet's state loaded or written on a busy machine), for at most this long; a loop stalled "
        "longer lets the lease expire so a standby takes over",
    )


def load_settings(config_file: Path | None = None) -> PlannerSettings:
    """Settings from a YAML or JSON file when one is given, each overridden by its environment variable."""
    return load(PlannerSettings, config_file, what="planner settings")


__all__ = ["PlannerSettings", "load_settings"]
