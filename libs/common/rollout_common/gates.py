"""A stage's gates beyond readiness, as a sequence declares them (SPEC section 11, CHK)."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict


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
