"""The specs and statuses of rollout's own custom resources (group `rollout.dev`, `v1alpha1`).

The CRDs' OpenAPI schemas are generated from these models and from the message models they
carry (`rollout_common`), so the apiserver and the services accept the same documents.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rollout_common.gates import GatePosition
from rollout_common.status import Track
from rollout_common.version import MinorText, VersionText


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class ReleaseSpec(_Spec):
    """Either a channel's release targets (START-1) or an on-demand version on some tracks (START-2)."""

    channel: str | None = Field(default=None, min_length=1, description="the channel these targets are for")
    targets: dict[MinorText, VersionText] | None = Field(
        default=None, description="minor -> version: clusters on that minor in the channel may go to that version"
    )
    version: VersionText | None = Field(default=None, description="an on-demand rollout of this version")
    tracks: tuple[Track, ...] | None = Field(
        default=None, description="the tracks of an on-demand rollout (default: controlPlane and nodes)"
    )


class RetryRequest(_Spec):
    """One retry of failed upgrades (OPS-4); a new `id` asks again."""

    id: str = Field(min_length=1, max_length=63, description="change it to retry again")
    stage: str | None = Field(default=None, description="only this stage's failed upgrades")
    cluster: str | None = Field(default=None, description="only this cluster's failed upgrades")


class RolloutSpec(_Spec):
    """What an operator asks of one rollout: the resource's spec is the only part users write."""

    rollout_id: str = Field(alias="rolloutId", min_length=1, description="the planner's rollout id (set by the bridge)")
    paused: bool = Field(default=False, description="true pauses the rollout (OPS-1), false resumes it")
    cancelled: bool = Field(default=False, description="true cancels the rollout (OPS-2); it cannot be undone")
    retry: RetryRequest | None = Field(default=None, description="retry failed upgrades (OPS-4)")


class ApprovalSpec(_Spec):
    """A waiting approval gate of a rollout's stage (CHK-1), made by the bridge; approve by setting `approved`."""

    rollout_id: str = Field(alias="rolloutId", min_length=1, description="the planner's rollout id")
    stage: str = Field(min_length=1, description="the stage whose gate waits")
    gate: GatePosition = Field(description="before: the stage starts once approved; after: it qualifies downstream")
    approved: bool = Field(default=False, description="set to true to open the gate; RBAC decides who may")
    approved_by: str | None = Field(
        default=None,
        alias="approvedBy",
        min_length=1,
        max_length=253,
        description="who approves (needed to approve)",
    )
    comment: str | None = Field(default=None, max_length=1024, description="why, in the approver's words")


class Condition(_Spec):
    """A Kubernetes status condition (metav1.Condition's fields)."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = Field(pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    message: str = ""
    observed_generation: int | None = Field(default=None, alias="observedGeneration", ge=0)
    last_transition_time: str = Field(alias="lastTransitionTime")


class PublishedStatus(_Spec):
    """The status the bridge keeps on a sequence, a release or an approval: what it published, and the answer."""

    published_generation: int | None = Field(
        default=None, alias="publishedGeneration", ge=0, description="the generation last published on Kafka"
    )
    event_id: str | None = Field(default=None, alias="eventId", description="the id it was published under")
    conditions: tuple[Condition, ...] = ()


class WaitStatus(_Spec):
    """One reason the planner holds a track back (STAT-5)."""

    rule: str
    message: str
    partition: str | None = None
    until: str | None = Field(default=None, description="when the wait ends, RFC 3339")


class TrackStatus(_Spec):
    track: Track
    stage: str
    state: str
    version: str | None = None
    reason: str = ""
    waits: tuple[WaitStatus, ...] = ()


class Commanded(_Spec):
    """The operator fields of the spec the bridge last turned into commands."""

    paused: bool = False
    cancelled: bool = False
    retry_id: str | None = Field(default=None, alias="retryId")


class RolloutStatus(_Spec):
    """A rollout's progress as the planner publishes it, in the shape `kubectl get` prints."""

    state: str | None = Field(default=None, description="RUNNING, PAUSED, CANCELLED or COMPLETED")
    stage: str | None = Field(default=None, description="the furthest stage a track of the rollout has reached")
    stages_reached: tuple[str, ...] = Field(
        default=(), alias="stagesReached", description="the stages the rollout has reached, in the order reached"
    )
    version: str | None = None
    waiting: str | None = Field(default=None, description="why it waits, in one line (empty: not waiting)")
    reason: str | None = Field(default=None, description="the planner's reason for the last state change")
    tracks: tuple[TrackStatus, ...] = ()
    observed_generation: int | None = Field(default=None, alias="observedGeneration", ge=0)
    published_generation: int | None = Field(
        default=None, alias="publishedGeneration", ge=0, description="the spec generation whose commands are sent"
    )
    commanded: Commanded | None = None
    conditions: tuple[Condition, ...] = ()
