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

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rollout_common.connection_settings import RedisServiceSettings, load
from rollout_common.status import Track


class DriverKind(str, Enum):
    SIMULATED = "simulated"
    COMMAND = "command"
    CLUSTER_API = "cluster-api"


class SimulatedDriverSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # Seconds per track before `time_scale`; a GKE control plane takes minutes, node pools longer.
    durations_s: dict[Track, float] = Field(default_factory=lambda: {Track.CONTROL_PLANE: 300.0, Track.NODES: 900.0})
    time_scale: float = Field(default=1.0, ge=0.0, description="multiplies every duration")
    failure_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    failing_clusters: frozenset[str] = frozenset()
    seed: int | None = Field(default=None, description="makes the failure draw reproducible")
    world_file: Path | None = Field(
        default=None,
        description="the simulated fleet's state, kept beyond the executor process: every completed upgrade appends "
        "a line `cluster track version fencing-token` (one atomic append), and the last line of a cluster and track "
        "is what it runs, as the probe before a re-run reads it; unset: nothing is kept and nothing can be probed",
    )


class CommandDriverSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    executable: str = ""
    args: tuple[str, ...] = ()
    timeout_s: float = Field(default=3600.0, gt=0.0)
    stderr_lines: int = Field(default=5, ge=1, description="how much of stderr a failure carries")
    probe: tuple[str, ...] = Field(
        default=(),
        description="argv of a program that prints the version a cluster's track runs (argv + cluster, track; "
        "first line of stdout, exit code 0); asked before an upgrade another executor left unrecorded is run "
        "again; empty: no probe",
    )
    probe_timeout_s: float = Field(default=60.0, gt=0.0, description="the probe's time; past it, it cannot tell")

    @field_validator("probe")
    @classmethod
    def _probe_names_a_program(cls, probe: tuple[str, ...]) -> tuple[str, ...]:
        # An empty program name would only fail at the first takeover, in the middle of a rollout.
        if probe and not probe[0].strip():
            raise ValueError("the first item must name the probe program")
        return probe


class ClusterApiDriverSettings(BaseModel):
    """The Cluster API driver: which management cluster, where the Cluster objects live."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kubeconfig: Path | None = Field(default=None, description="None: $KUBECONFIG, ~/.kube/config or in-cluster")
    kube_context: str | None = None
    namespace: str = Field(default="default", description="namespace of the Cluster API objects")
    timeout_s: float = Field(default=3600.0, gt=0.0, description="patch to ready, per cluster and track")
    poll_interval_s: float = Field(default=5.0, gt=0.0, description="how often the status is read while waiting")


def _default_executor_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class ExecutorSettings(RedisServiceSettings):
    group_id: str = Field(
        default="rollout-executors", description="the executors' consumer group (under the topic prefix)"
    )
    executor_id: str = Field(default_factory=_default_executor_id)
    max_concurrent_upgrades: int = Field(default=5, ge=1, description="clusters upgraded at once")
    batch_max_records: int = Field(default=10, ge=1, description="commands taken per poll")
    max_clusters_per_command: int = Field(
        default=50,
        ge=1,
        description="the most clusters one stage-advance command names (the rollout's maxNew): sizes the default "
        "max_poll_interval_s, since upgrades run max_concurrent_upgrades clusters at a time across the batch",
    )
    lease_s: int = Field(default=30, ge=1, description="a dead executor's claim is taken over after 1-2x this")
    shutdown_grace_s: float = Field(default=10.0, ge=0.0)
    driver: DriverKind = DriverKind.SIMULATED
    probe_before_rerun: bool = Field(
        default=True,
        description="on taking over a target another executor held and left without a recorded result, ask the "
        "driver what the track runs first, and record success instead of upgrading again when it already runs "
        "the version (drivers that cannot tell upgrade again)",
    )
    simulated: SimulatedDriverSettings = Field(default_factory=SimulatedDriverSettings)
    command: CommandDriverSettings = Field(default_factory=CommandDriverSettings)
    cluster_api: ClusterApiDriverSettings = Field(default_factory=ClusterApiDriverSettings)
    session_timeout_s: float = Field(
        default=10.0, ge=3.0, description="the broker drops a member whose heartbeats stop this long (process gone)"
    )
    max_poll_interval_s: float | None = Field(
        default=None,
        gt=0.0,
        description="longest batch before the member leaves the group; default: the longest a batch can take "
        "(upgrade duration or command timeout x rounds: batch_max_records x max_clusters_per_command clusters, "
        "max_concurrent_upgrades at a time) plus a margin",
    )
    metrics_host: str = "0.0.0.0"
    metrics_port: int = Field(default=9464, ge=0, le=65535, description="0 disables the HTTP endpoints")


def poll_interval_s(settings: ExecutorSettings) -> float:
    """How long one batch may keep the executor from polling without it leaving the group.

    aiokafka heartbeats from a background task, so a long batch never breaks the session; it
    only breaks `max_poll_interval_ms`, after which the member leaves the group and its commit is
    refused (the batch is redelivered and re-published from the ledger, upgrading nothing twice,
    but the work of a whole batch is repeated). The executor therefore allows the longest a batch
    can take: its clusters (up to `batch_max_records` commands of up to `max_clusters_per_command`
    each) are upgraded `max_concurrent_upgrades` at a time, each bounded by the driver.
    """
    if settings.max_poll_interval_s is not None:
        return settings.max_poll_interval_s
    if settings.driver is DriverKind.COMMAND:
        per_upgrade = settings.command.timeout_s
    elif settings.driver is DriverKind.CLUSTER_API:
        per_upgrade = settings.cluster_api.timeout_s
    else:
        per_upgrade = max(settings.simulated.durations_s.values(), default=0.0) * settings.simulated.time_scale
    clusters = settings.batch_max_records * settings.max_clusters_per_command
    rounds = -(-clusters // settings.max_concurrent_upgrades)
    return max(300.0, rounds * per_upgrade * 1.5 + 60.0)


def load_settings(config_file: Path | None = None) -> ExecutorSettings:
    return load(ExecutorSettings, config_file, what="executor settings")
