"""Kubernetes label selectors: `matchLabels` and `matchExpressions` (SEQ-5)."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rollout_common.labels import LabelMap


class Operator(str, Enum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


class Requirement(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        # In and NotIn need values, Exists and DoesNotExist take none: the model's check, as schema
        json_schema_extra={
            "if": {"properties": {"operator": {"enum": ["In", "NotIn"]}}},
            "then": {"required": ["values"], "properties": {"values": {"minItems": 1}}},
            "else": {"properties": {"values": {"maxItems": 0}}},
        },
    )

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    @field_validator("values", mode="before")
    @classmethod
    def _as_text(cls, value: object) -> object:
        if isinstance(value, (list, tuple)):
            return tuple(str(v).lower() if isinstance(v, bool) else str(v) for v in value)
        return value

    @model_validator(mode="after")
    def _values_fit_operator(self) -> Requirement:
        needs_values = self.operator in (Operator.IN, Operator.NOT_IN)
        if needs_values and not self.values:
            raise ValueError(f"operator {self.operator.value} needs at least one value")
        if not needs_values and self.values:
            raise ValueError(f"operator {self.operator.value} takes no values")
        return self

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator is Operator.IN:
            return present and labels[self.key] in self.values
        if self.operator is Operator.NOT_IN:
            return not present or labels[self.key] not in self.values
        if self.operator is Operator.EXISTS:
            return present
        return not present


class LabelSelector(BaseModel):
    """All requirements must hold; an empty selector matches everything (Kubernetes semantics)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    match_labels: LabelMap = Field(default_factory=dict, alias="matchLabels")
    match_expressions: tuple[Requirement, ...] = Field(default=(), alias="matchExpressions")

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match_labels.items():
            if labels.get(key) != value:
                return False
        return all(req.matches(labels) for req in self.match_expressions)


class FleetLabelSelector(LabelSelector):
    """A selector read as Fleet reads one: keys other than matchLabels and matchExpressions are ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)
