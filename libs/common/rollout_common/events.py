"""What the engine consumes: one pydantic model per kind, closed as a discriminated union."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from rollout_common.fleet import Cluster, ClusterGroup
from rollout_common.gates import GatePosition
from rollout_common.sequence import Sequence, SoakSeconds, check_soak
from rollout_common.status import Track
from rollout_common.version import MinorText, VersionText


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class ReleaseTarget(_Event):
    """'Clusters on minor M in channel C may now go to V', one entry per minor (START-1)."""

    kind: Literal["release_target"] = "release_target"
    event_id: str = Field(alias="eventId", min_length=1)
    channel: str
    # a minor the pattern does not name is no target: the schema says so as the model does
    targets: dict[MinorText, VersionText] = Field(min_length=1, json_schema_extra={"additionalProperties": False})


class StartRollout(_Event):
    """An operator's on-demand rollout of one version (START-2, VER-6a)."""

    kind: Literal["start_rollout"] = "start_rollout"
    event_id: str = Field(alias="eventId", min_length=1)
    version: VersionText
    tracks: tuple[Track, ...] = Field(default=(Track.CONTROL_PLANE, Track.NODES), json_schema_extra={"minItems": 1})

    @field_validator("tracks")
    @classmethod
    def _some_track(cls, value: tuple[Track, ...]) -> tuple[Track, ...]:
        if not value:
            raise ValueError("tracks: choose controlPlane, nodes or both")
        return value


class OperatorCommand(_Event):
    """Pause, resume, cancel, retry, set/clear a soak override (OPS-1..5), or approve a gate (CHK-1).

    A command that changes a rollout names it (`rolloutId`) or says `all: true` (OPS-5). `retry`
    narrows to one `cluster` or one `stage` when given (OPS-4). `approve` names its `stage` and
    `gate`, and says who approved in `issuedBy` (a person, a pipeline, a ticketing system).
    """

    kind: Literal["operator_command"] = "operator_command"
    command_id: str = Field(alias="commandId", min_length=1)
    action: Literal["pause", "resume", "cancel", "soak_override", "retry", "approve"]
    rollout_id: str | None = Field(default=None, alias="rolloutId")
    all_rollouts: bool = Field(default=False, alias="all", description="apply to every active rollout (OPS-5)")
    stage: str | None = None
    cluster: str | None = Field(default=None, description="retry: only this cluster's failed upgrades (OPS-4)")
    # Any text: a command naming a version that is not one is still acknowledged, rejected with the
    # reason (OPS-3), rather than dead-lettered.
    version: str | None = None
    soak: SoakSeconds | None = Field(default=None, description="seconds; None clears the override")
    issued_by: str | None = Field(default=None, alias="issuedBy")
    gate: GatePosition | None = Field(default=None, description="approve: the gate approved (CHK-1)")
    comment: str | None = Field(default=None, description="approve: why, in the approver's words (CHK-1)")

    @field_validator("soak", mode="before")
    @classmethod
    def _soak(cls, value: object) -> object:
        return None if value is None else check_soak(value, field="soak")


class UpgradeResult(_Event):
    """An executor's report about one cluster on one track."""

    kind: Literal["upgrade_result"] = "upgrade_result"
    command_id: str = Field(alias="commandId", min_length=1)
    cluster: str
    track: Track
    # Checked at the door: the engine parses it, and a bad one there would stop the planner on
    # every redelivery of the record instead of dead-lettering it once (BUS-4).
    version: VersionText
    outcome: Literal["started", "succeeded", "failed"]
    error: str | None = None
    finished_at: float | None = Field(
        default=None, alias="finishedAt", description="epoch seconds when the executor saw this outcome (BUS-7)"
    )


class Readiness(_Event):
    kind: Literal["readiness"] = "readiness"
    cluster: str
    ready: StrictBool
    reason: str | None = None
    observed_at: float | None = Field(
        default=None, alias="observedAt", description="epoch seconds when the cluster was observed (BUS-7)"
    )
    # What the cluster itself said it runs at that observation, when its probe can read it: the
    # planner does not count an upgrade done while the cluster reports another version.
    control_plane_version: VersionText | None = Field(
        default=None, alias="controlPlaneVersion", description="the version the cluster's API server reports"
    )
    node_version: VersionText | None = Field(
        default=None, alias="nodeVersion", description="the lowest version the cluster's kubelets report"
    )


class InventoryChange(_Event):
    """A cluster registered, changed (relabelled, new window...) or removed (SEQ-6); or a cluster group
    defined, changed or removed (`clusterGroup`; on removal only its name counts)."""

    kind: Literal["inventory"] = "inventory"
    action: Literal["upsert", "remove"]
    cluster: Cluster | None = None
    name: str | None = None
    cluster_group: ClusterGroup | None = Field(default=None, alias="clusterGroup")


class SequenceChange(_Event):
    """An operator's changed sequence definition for a running planner (SEQ-7), acknowledged (OPS-3)."""

    kind: Literal["sequence_change"] = "sequence_change"
    command_id: str = Field(alias="commandId", min_length=1)
    sequence: Sequence
    issued_by: str | None = Field(default=None, alias="issuedBy")


class WakeUp(_Event):
    """A timer the engine asked for has come due."""

    kind: Literal["wake_up"] = "wake_up"


Event = Annotated[
    ReleaseTarget
    | StartRollout
    | OperatorCommand
    | SequenceChange
    | UpgradeResult
    | Readiness
    | InventoryChange
    | WakeUp,
    Field(discriminator="kind"),
]


class EventBatch(_Event):
    """Events that happened at one instant, decided together (SOAK-1's 'within one instant')."""

    kind: Literal["batch"] = "batch"
    events: tuple[Event, ...]
