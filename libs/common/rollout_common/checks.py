"""A stage's metric checks (CHK-2) as a sequence declares them, and where their queries are asked.

The fields are the ones the conformance FORMAT names. Conditions are parsed here, so a sequence
with a condition that does not parse is refused when it is read or applied, with the stage and
check named (`rollout_common.condition.check_condition`).
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, WithJsonSchema, field_validator

from rollout_common.condition import ConditionError, parse_condition
from rollout_common.duration import parse_duration

# A duration above zero: some digit other than 0 before the end (`0s` and `0.0m` are refused).
POSITIVE_DURATION_PATTERN = r"^(?=[^1-9]*[1-9])([0-9]+(\.[0-9]+)?[smhd])+(?![\s\S])"
INTERVAL_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "number", "exclusiveMinimum": 0, "description": "seconds"},
        {"type": "string", "pattern": POSITIVE_DURATION_PATTERN, "description": "a duration such as 30s or 5m"},
    ],
    "description": "how often the check is evaluated while it guards a phase: seconds, or a duration such as 5m",
}
IntervalSeconds = Annotated[float, WithJsonSchema(INTERVAL_SCHEMA)]
DEFAULT_FAILURE_LIMIT = 0
DEFAULT_INCONCLUSIVE_LIMIT = 2


class CheckPhase(str, Enum):
    """What a check guards: a stage's track while `IN_PROGRESS`, or while `SOAKING`/`FORCED_SOAKING`."""

    PROGRESS = "progress"
    SOAK = "soak"


class Check(BaseModel):
    """One metric check of a stage: a PromQL query whose first sample's value is judged by conditions."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    name: str = Field(min_length=1, max_length=63)
    query: str = Field(min_length=1, description="PromQL, evaluated as an instant query")
    success_condition: str = Field(alias="successCondition", min_length=1, description="e.g. result < 0.01")
    failure_condition: str | None = Field(
        default=None,
        alias="failureCondition",
        min_length=1,
        description="failed when true, even if the success condition holds",
    )
    interval: IntervalSeconds
    failure_limit: int = Field(
        default=DEFAULT_FAILURE_LIMIT, alias="failureLimit", ge=0, description="failed results in a row tolerated"
    )
    inconclusive_limit: int = Field(
        default=DEFAULT_INCONCLUSIVE_LIMIT,
        alias="inconclusiveLimit",
        ge=0,
        description="results in a row without data or with an error tolerated",
    )
    phases: tuple[CheckPhase, ...] = Field(
        default=(CheckPhase.PROGRESS, CheckPhase.SOAK),
        min_length=1,
        json_schema_extra={"uniqueItems": True},
    )

    @field_validator("interval", mode="before")
    @classmethod
    def _interval(cls, value: object) -> float:
        seconds = parse_duration(value, field="interval")
        if seconds <= 0:
            raise ValueError(f"must be above zero, got {value!r}")
        return seconds

    @field_validator("success_condition", "failure_condition")
    @classmethod
    def _parses(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return value
        field = "successCondition" if info.field_name == "success_condition" else "failureCondition"
        try:
            parse_condition(value)
        except ConditionError as exc:
            # The stage adds its own name in front (Stage._checks).
            raise ValueError(f"check {info.data.get('name', '?')!r}: {field} {value!r} {exc}") from exc
        return value

    @field_validator("phases")
    @classmethod
    def _distinct(cls, value: tuple[CheckPhase, ...]) -> tuple[CheckPhase, ...]:
        if len(set(value)) != len(value):
            raise ValueError("name progress and soak at most once each")
        return value

    def guards(self, phase: CheckPhase) -> bool:
        return phase in self.phases


__all__ = [
    "DEFAULT_FAILURE_LIMIT",
    "DEFAULT_INCONCLUSIVE_LIMIT",
    "INTERVAL_SCHEMA",
    "Check",
    "CheckPhase",
    "IntervalSeconds",
]
