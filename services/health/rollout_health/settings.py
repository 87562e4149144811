"""Configuration of the health reporter and the health monitor: `ROLLOUT_*` variables, or YAML.

Nested sections use `__` in variable names (`ROLLOUT_SIMULATED__READY_AFTER_S=5`); lists and maps
are JSON (`ROLLOUT_CLUSTERS='["c1","c2"]'`). The environment wins over a `--config` file.
"""

from __future__ import annotations

import uuid
from enum import Enum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator
from pydantic_settings import SettingsConfigDict

from rollout_common.connection_settings import RedisServiceSettings, ServiceSettings, read_config_file
from rollout_common.sequence import END_OF_TEXT, PROMETHEUS_URL_PATTERN


class ProbeKind(str, Enum):
    SIMULATED = "simulated"
    COMMAND = "command"
    HTTP = "http"
    KUBERNETES = "kubernetes"


class OfflineWindow(BaseModel):
    """A scripted outage, in seconds after the reporter starts (before `time_scale`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    from_s: float = Field(default=0.0, ge=0.0)
    until_s: float | None = Field(default=None, description="None: offline for good")


class SimulatedProbeSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    ready_after_s: float = Field(default=60.0, ge=0.0, description="settling time after a successful upgrade")
    time_scale: float = Field(default=1.0, ge=0.0)
    offline: dict[str, OfflineWindow] = Field(default_factory=dict)


class CommandProbeSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    executable: str = ""
    args: tuple[str, ...] = ()
    timeout_s: float = Field(default=10.0, gt=0.0)


class HttpProbeSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    url_template: str = Field(default="", description="with {cluster}, e.g. https://{cluster}.example/readyz")
    timeout_s: float = Field(default=5.0, gt=0.0)


class KubernetesProbeSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kubeconfig: Path | None = Field(
        default=None, description="the management cluster (for <cluster>-kubeconfig Secrets); None: the environment's"
    )
    kube_context: str | None = None
    namespace: str = Field(default="default", description="namespace of the <cluster>-kubeconfig Secrets")
    workload_kubeconfig: Path | None = Field(
        default=None, description="instead of Secrets: a kubeconfig with one context per cluster, named as it"
    )
    timeout_s: float = Field(default=5.0, gt=0.0)


class ChecksSettings(BaseModel):
    """How the health service asks Prometheus for the metric checks (CHK-2)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prometheus_url: str = Field(
        default="http://localhost:9090",
        pattern=PROMETHEUS_URL_PATTERN.removesuffix(END_OF_TEXT) + "$",
        description="Prometheus's base URL for sequences that name none (a sequence's prometheusUrl wins); "
        "no credentials in it (they would show in the reasons of inconclusive results)",
    )
    timeout_s: float = Field(
        default=10.0, gt=0.0, description="a query unanswered this long (connect included) is inconclusive"
    )
    bearer_token: SecretStr | None = Field(default=None, description="secret: sent as Authorization: Bearer")
    basic_auth_username: str | None = Field(
        default=None, pattern="^[^:]+$", description="basic auth user (no ':'), with basic_auth_password"
    )
    basic_auth_password: SecretStr | None = Field(default=None, description="secret: with basic_auth_username")

    @model_validator(mode="after")
    def _one_way_to_authenticate(self) -> ChecksSettings:
        if (self.basic_auth_username is None) != (self.basic_auth_password is None):
            raise ValueError("checks: basic_auth_username and basic_auth_password go together")
        if self.bearer_token is not None and self.basic_auth_username is not None:
            raise ValueError("checks: choose bearer_token or basic auth, not both")
        return self


class _Common(ServiceSettings):
    # One config file may serve the reporter and the monitor, each ignoring the other's keys.
    model_config = SettingsConfigDict(extra="ignore")

    metrics_host: str = Field(default="0.0.0.0", description="address of /healthz, /readyz and /metrics")
    metrics_port: int = Field(
        default=0, ge=0, le=65535, description="/healthz, /readyz and /metrics (the monitor: in its worker); 0 disables"
    )


class ReporterSettings(_Common):
    reporter_id: str = Field(default_factory=lambda: f"reporter-{uuid.uuid4().hex[:8]}")
    clusters: tuple[str, ...] = ()
    probe: ProbeKind = ProbeKind.SIMULATED
    probe_interval_s: float = Field(default=5.0, gt=0.0, description="how often each cluster is probed")
    heartbeat_interval_s: float = Field(default=30.0, gt=0.0, description="re-sent unchanged this often")
    simulated: SimulatedProbeSettings = Field(default_factory=SimulatedProbeSettings)
    command: CommandProbeSettings = Field(default_factory=CommandProbeSettings)
    http: HttpProbeSettings = Field(default_factory=HttpProbeSettings)
    kubernetes: KubernetesProbeSettings = Field(default_factory=KubernetesProbeSettings)


class MonitorSettings(_Common):
    app_id: str = Field(default="rollout-health", description="faust app id (prefixed by topic_prefix)")
    staleness_limit_s: float = Field(default=90.0, gt=0.0)
    check_interval_s: float = Field(default=5.0, gt=0.0, description="how often the staleness timer runs")
    max_future_skew_s: float = Field(
        default=30.0,
        ge=0.0,
        description="a heartbeat observed more than this ahead of the monitor's clock is dead-lettered (BUS-7): "
        "it would keep its cluster from going stale; reporters' clocks must be this close to the monitor's",
    )
    session_timeout_s: float = Field(
        default=10.0,
        ge=6.0,
        description="Kafka group session timeout of the monitor: how long a dead worker holds its partitions",
    )
    republish_interval_s: float = Field(
        default=30.0,
        ge=0.0,
        description="republish every cluster's readiness this often even without a change (spread over the "
        "interval), so a change the planner saw out of order with the upgrade it follows, or one lost "
        "in a crash, is corrected; 0 disables",
    )
    checkpoint_interval_s: float = Field(
        default=120.0,
        gt=0.0,
        description="a heartbeat that changes nothing is kept in memory; the cluster's row (and its changelog) "
        "records its time at most this often. A worker that takes over a partition (restart, rebalance) counts "
        "a silence from the row's time plus this, so a cluster silent across a takeover is marked stale up to "
        "this much later than the limit, never early",
    )
    row_expiry_s: float = Field(
        default=900.0,
        gt=0.0,
        description="a cluster silent this long, already published stale, loses its row: its stale mark is no "
        "longer repeated (a made-up, mistyped or decommissioned name is not said again for ever); if it reports "
        "again, its next heartbeat is a first one. Must exceed staleness_limit_s",
    )
    batch_max_records: int = Field(
        default=500,
        ge=1,
        description="most heartbeats the agent takes at a time: those fetched while it judged the previous ones "
        "(the agent never waits to fill a batch; the broker may hold a fetch, see fetch_min_bytes)",
    )
    fetch_min_bytes: int = Field(
        default=1024 * 1024,
        ge=1,
        description="the broker holds a heartbeat fetch until this many bytes have arrived (or fetch_max_wait_s): "
        "a fleet at rest is read a batch at a time, not a record at a time, at about half the CPU per heartbeat",
    )
    fetch_max_wait_s: float = Field(
        default=0.25,
        gt=0.0,
        le=1.5,
        description="the longest the broker holds a heartbeat fetch for fetch_min_bytes: the most a heartbeat "
        "waits for others before it is judged",
    )
    metadata_max_age_s: float = Field(
        default=10.0,
        gt=0.0,
        le=300.0,
        description="how often a worker's consumer reads the topics' metadata again: a group assignment made "
        "while the broker was restarting (its topics not yet listed) leaves a worker without heartbeat "
        "partitions until then, and partitions added to the heartbeats topic are taken up within it",
    )
    store_url: str = Field(default="memory://", description="faust table store; the changelog is in Kafka")
    # None keeps faust's own choice, relative to the working directory: the image's working
    # directory is the service user's home and the Kubernetes manifest mounts a writable volume
    # there, whereas a fixed absolute path would need a volume of its own in every deployment.
    data_dir: Path | None = Field(
        default=None,
        description="faust's data directory: a disk store's table files, only empty directories with memory://; "
        "None: <topic_prefix><app_id>-data in the working directory",
    )
    web_port: int = Field(default=0, ge=0, le=65535, description="faust's web server; 0 disables it")
    restart_backoff_max_s: float = Field(default=30.0, gt=0.0)

    @model_validator(mode="after")
    def _expiry_after_staleness(self) -> MonitorSettings:
        if self.row_expiry_s <= self.staleness_limit_s:
            raise ValueError(
                f"row_expiry_s ({self.row_expiry_s:g}) must exceed staleness_limit_s ({self.staleness_limit_s:g}): "
                "a row is dropped only after its cluster was published stale"
            )
        return self


class CheckRunnerSettings(_Common, RedisServiceSettings):
    """The check runner: Kafka (the planner's check series in, results out), the Redis store the planner
    keeps its sequence in (its namespace), and how to ask Prometheus."""

    checks: ChecksSettings = Field(default_factory=ChecksSettings)
    idle_poll_s: float = Field(
        default=1.0,
        gt=0.0,
        le=30.0,
        description="how long one read of the progress topic waits when no check is due sooner: "
        "the longest a series the planner starts waits for its first evaluation past its start",
    )


class InventorySettings(_Common):
    """The inventory watcher: which management cluster, which objects, where it keeps its place."""

    kubeconfig: Path | None = Field(default=None, description="None: $KUBECONFIG, ~/.kube/config or in-cluster")
    kube_context: str | None = Field(default=None, description="a context of the kubeconfig; None: its current one")
    cluster_kind: str = Field(default="cluster-api", pattern="^(cluster-api|fleet)$", description="what to watch")
    namespace: str | None = Field(default=None, description="watch one namespace; None: all of them")
    fleet_groups: bool = Field(default=False, description="also watch Fleet ClusterGroups (group, groupLabels)")
    kubeadm_control_planes: bool = Field(
        default=True,
        description="cluster-api: read a Cluster's version from its KubeadmControlPlane (status.version); "
        "false where that provider is not installed (the rollout/version annotation is read instead)",
    )
    checkpoint_file: Path | None = Field(default=None, description="keeps resourceVersions across restarts")
    watch_timeout_s: int = Field(default=300, gt=0, description="the server ends a watch after this; it resumes")


__all__ = [
    "CheckRunnerSettings",
    "ChecksSettings",
    "InventorySettings",
    "MonitorSettings",
    "ReporterSettings",
    "read_config_file",
]
