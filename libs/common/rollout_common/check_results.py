"""What one evaluation of a metric check found (CHK-2): the health service publishes it, the
planner applies it like readiness (BUS-7: only newer observations count)."""

from __future__ import annotations

from enum import Enum
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat

from rollout_common.epoch import EpochSeconds


class CheckOutcome(str, Enum):
    """`failed`: the success condition is false or the failure condition true; `inconclusive`: no
    sample, a query error, a value that is no finite number, an unreachable or refusing server."""

    PASSED = "passed"
    FAILED = "failed"
    INCONCLUSIVE = "inconclusive"


class CheckResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, allow_inf_nan=False)

    kind: Literal["check_result"] = "check_result"
    # a result from far ahead would hide every newer one (BUS-7): readers refuse it past their skew
    TIME_FIELDS: ClassVar[tuple[tuple[str, str], ...]] = (("observed_at", "observedAt"),)
    rollout_id: str = Field(alias="rolloutId", min_length=1)
    stage: str = Field(min_length=1)
    check: str = Field(min_length=1)
    observed_at: EpochSeconds = Field(
        alias="observedAt", description="epoch seconds when the query was evaluated (BUS-7)"
    )
    value: StrictFloat | None = Field(description="the first sample's value; null without one")
    outcome: CheckOutcome
    reason: str = Field(min_length=1, description="why this outcome, e.g. 0.05 against result < 0.01")


__all__ = ["CheckOutcome", "CheckResult"]
