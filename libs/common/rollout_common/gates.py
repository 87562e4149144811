"""A stage's gates beyond readiness, as a sequence declares them (SPEC section 11, CHK)."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, WithJsonSchema, field_validator

from rollout_common.duration import DAY, DURATION_PATTERN, parse_duration


class GatePosition(str, Enum):
    """CHK-1: where an approval gate stands in a stage's run."""

    BEFORE = "before"
    AFTER = "after"


class Approval(BaseModel):
    """CHK-1: whether a stage waits for an approval before it starts a version, after it soaked it, or both."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    before: bool = False
    after: bool = False

    def requires(self, position: GatePosition) -> bool:
        return self.before if position is GatePosition.BEFORE else self.after

    @property
    def any(self) -> bool:
        return self.before or self.after


MAX_UPGRADE_INTERVAL = 365 * DAY

INTERVAL_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "number", "minimum": 0, "maximum": MAX_UPGRADE_INTERVAL, "description": "seconds"},
        {"type": "string", "pattern": DURATION_PATTERN, "description": "a duration such as 24h or 30d"},
    ],
    "description": "a minimum time between two upgrades of a cluster's track, from 0s to 365d (CHK-4)",
}
IntervalSeconds = Annotated[float, WithJsonSchema(INTERVAL_SCHEMA)]


class UpgradeKind(str, Enum):
    """CHK-4: an upgrade is `minor` when it changes the minor version, else `patch`."""

    PATCH = "patch"
    MINOR = "minor"


class MinUpgradeInterval(BaseModel):
    """CHK-4: the least time between two upgrades of the same cluster and track, by the new upgrade's kind.

    A field left out is taken from the sequence when a stage sets the block (the stage wins field by
    field), and is no minimum when neither sets it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    patch: IntervalSeconds | None = Field(default=None, exclude_if=lambda value: value is None)
    minor: IntervalSeconds | None = Field(default=None, exclude_if=lambda value: value is None)

    @field_validator("patch", "minor", mode="before")
    @classmethod
    def _interval(cls, value: object, info: ValidationInfo) -> float | None:
        if value is None:
            return None
        seconds = parse_duration(value, field=f"minUpgradeInterval.{info.field_name}")
        if not 0 <= seconds <= MAX_UPGRADE_INTERVAL:
            raise ValueError(
                f"minUpgradeInterval.{info.field_name}: must be between 0s and 365d (CHK-4), got {value!r}"
            )
        return seconds

    def over(self, wider: MinUpgradeInterval | None) -> MinUpgradeInterval:
        """This block with the fields it leaves out taken from `wider` (a stage's over its sequence's)."""
        if wider is None:
            return self
        return MinUpgradeInterval(
            patch=wider.patch if self.patch is None else self.patch,
            minor=wider.minor if self.minor is None else self.minor,
        )

    def seconds(self, kind: UpgradeKind) -> float:
        value = self.minor if kind is UpgradeKind.MINOR else self.patch
        return value or 0.0
