"""What the engine consumes: one pydantic model per kind, closed as a discriminated union."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from rollout_common.check_results import CheckResult
from rollout_common.epoch import EpochSeconds
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

    def misplaced_field(self) -> str | None:
        """Why a field given does not belong to the action (OPS-3 rejects the command with it), or
        None. A model error would dead-letter the command unanswered; and a pause naming a stage,
        taken as it is, would pause the whole rollout."""
        takes = _ACTION_FIELDS[self.action]
        for name in _NARROWING_FIELDS:
            value = getattr(self, name)
            if value is not None and value is not False and name not in takes:
                alias = OperatorCommand.model_fields[name].alias or name
                return f"{self.action} takes no {alias}: {_WHAT_ACTIONS_TAKE[self.action]}"
        return None


# The fields that say what an operator command applies to, and which of them each action takes.
_NARROWING_FIELDS = ("rollout_id", "all_rollouts", "stage", "cluster", "version", "soak", "gate")
_ROLLOUT_WIDE = frozenset({"rollout_id", "all_rollouts"})
_ACTION_FIELDS: dict[str, frozenset[str]] = {
    "pause": _ROLLOUT_WIDE,
    "resume": _ROLLOUT_WIDE,
    "cancel": _ROLLOUT_WIDE,
    "retry": _ROLLOUT_WIDE | {"stage", "cluster"},
    "soak_override": frozenset({"stage", "version", "soak"}),
    "approve": _ROLLOUT_WIDE | {"stage", "gate"},
}
_WHAT_ACTIONS_TAKE = {
    "pause": "it applies to a whole rollout (rolloutId, or all) (OPS-1, OPS-5)",
    "resume": "it applies to a whole rollout (rolloutId, or all) (OPS-1, OPS-5)",
    "cancel": "it applies to a whole rollout (rolloutId, or all) (OPS-1, OPS-5)",
    "retry": "it narrows to a stage or a cluster of a rollout (rolloutId, or all) (OPS-4)",
    "soak_override": "an override is for a stage and a version, whatever the rollout (stage, version, soak) (OPS-2)",
    "approve": "it opens one gate of a stage for a rollout (rolloutId, or all; stage, gate) (CHK-1)",
}


class UpgradeResult(_Event):
    """An executor's report about one cluster on one track."""

    TIME_FIELDS: ClassVar[tuple[tuple[str, str], ...]] = (("finished_at", "finishedAt"),)

    kind: Literal["upgrade_result"] = "upgrade_result"
    command_id: str = Field(alias="commandId", min_length=1)
    cluster: str
    track: Track
    # Checked at the door: the engine parses it, and a bad one there would stop the planner on
    # every redelivery of the record instead of dead-lettering it once (BUS-4).
    version: VersionText
    outcome: Literal["started", "succeeded", "failed"]
    error: str | None = None
    finished_at: EpochSeconds | None = Field(
        default=None, alias="finishedAt", description="epoch seconds when the executor saw this outcome (BUS-7)"
    )


class Readiness(_Event):
    TIME_FIELDS: ClassVar[tuple[tuple[str, str], ...]] = (("observed_at", "observedAt"),)

    kind: Literal["readiness"] = "readiness"
    cluster: str
    ready: StrictBool
    reason: str | None = None
    observed_at: EpochSeconds | None = Field(
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
    | CheckResult
    | WakeUp,
    Field(discriminator="kind"),
]


class EventBatch(_Event):
    """Events that happened at one instant, decided together (SOAK-1's 'within one instant')."""

    kind: Literal["batch"] = "batch"
    events: tuple[Event, ...]
