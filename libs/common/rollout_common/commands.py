"""What the engine asks the shell to do or to tell: one pydantic model per kind."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from rollout_common.epoch import LATEST_EPOCH, EpochSeconds
from rollout_common.gates import GatePosition
from rollout_common.status import RolloutState, StageState, Track
from rollout_common.version import VersionText


class _Command(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class StageAdvance(_Command):
    """One batch: at most maxNew clusters of one partition, one track, one version (GATE-1)."""

    kind: Literal["stage_advance"] = "stage_advance"
    command_id: str = Field(alias="commandId", min_length=1)
    rollout_id: str = Field(alias="rolloutId")
    stage: str
    track: Track
    partition: str
    # A command with a bad version is dead-lettered at the door, never turned into results that
    # carry it (which the planner's UpgradeResult would refuse).
    version: VersionText
    clusters: tuple[str, ...]
    retries: dict[str, int] = Field(
        default_factory=dict,
        description="OPS-4: per cluster, how often an operator retried its failed upgrade to this version; "
        "absent means 0. Executors keep each attempt apart, so a retried target runs once more.",
    )


class StageTransition(_Command):
    kind: Literal["stage_transition"] = "stage_transition"
    rollout_id: str = Field(alias="rolloutId")
    stage: str
    track: Track
    state: StageState
    version: VersionText | None = None
    reason: str
    until: float | None = None
    # Left out of the record unless set, so every other transition reads as it always did.
    gate: GatePosition | None = Field(
        default=None,
        exclude_if=lambda gate: gate is None,
        description="AWAITING_APPROVAL: the approval gate the track waits at (CHK-1)",
    )


class RolloutTransition(_Command):
    kind: Literal["rollout_transition"] = "rollout_transition"
    rollout_id: str = Field(alias="rolloutId")
    state: RolloutState
    reason: str


class CommandAck(_Command):
    """OPS-3: every operator command is answered on the progress stream."""

    kind: Literal["command_ack"] = "command_ack"
    command_id: str = Field(alias="commandId", min_length=1)
    accepted: StrictBool
    reason: str


class Wait(_Command):
    """One reason the planner is holding back (STAT-5)."""

    rule: str
    message: str
    partition: str | None = None
    numbers: dict[str, Any] = Field(default_factory=dict)
    clusters: tuple[str, ...] = ()
    until: float | None = None


class WaitChanged(_Command):
    kind: Literal["wait_changed"] = "wait_changed"
    rollout_id: str = Field(alias="rolloutId")
    stage: str
    track: Track
    waits: tuple[Wait, ...]


class Notice(_Command):
    """Something an operator should see that is not a state change (membership, ineligibility)."""

    kind: Literal["notice"] = "notice"
    code: str
    message: str
    cluster: str | None = None
    stage: str | None = None


class CheckSeries(_Command):
    """CHK-2: a metric check's series for a rollout at a stage started (`running`) or ended.

    While it runs, the check is evaluated at `since` and then every `interval` seconds; the health
    service does so and publishes each result. A later series starts with a new `since`."""

    kind: Literal["check_series"] = "check_series"
    rollout_id: str = Field(alias="rolloutId", min_length=1)
    stage: str = Field(min_length=1)
    check: str = Field(min_length=1)
    running: StrictBool
    # bounded like every event time: the check runner reads these from the progress topic, which any
    # client with a grant can write to, and an infinite or far-future time must not stall it
    since: EpochSeconds = Field(description="epoch seconds when the series started (its first evaluation)")
    interval: float = Field(
        gt=0, le=LATEST_EPOCH, allow_inf_nan=False, description="seconds between two evaluations of the series"
    )


class WakeAt(_Command):
    """Call the engine again with WakeUp at this instant (epoch seconds)."""

    kind: Literal["wake_at"] = "wake_at"
    at: float


Command = StageAdvance | StageTransition | RolloutTransition | CommandAck | WaitChanged | Notice | CheckSeries | WakeAt
