"""Sequences, stages and Fleet's rolloutStrategy, validated with messages naming the field (SEQ, PART)."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from rollout_common.checks import Check
from rollout_common.duration import DAY, DURATION_PATTERN, parse_duration
from rollout_common.gates import Approval, MinUpgradeInterval
from rollout_common.quantity import (
    POSITIVE_COUNT_OR_PERCENT_SCHEMA,
    CountOrPercent,
    check_count_or_percent,
    resolve,
)
from rollout_common.selector import FleetLabelSelector, LabelSelector
from rollout_common.version import VersionText, check_version_text
from rollout_common.window import MaintenanceWindow

MAX_SOAK = 30 * DAY
# JSON Schema regexes search, and `$` there also matches before a final newline: the end of text is
# said as "no character follows".
END_OF_TEXT = r"(?![\s\S])"
# No user:password@ in it: credentials are the health service's settings, and a sequence travels on
# Kafka (and an address shows in the reasons of inconclusive results).
PROMETHEUS_URL_PATTERN = r"^https?://[^\s/?#@]+(/[^\s?#]*)?" + END_OF_TEXT
DEFAULT_SOAK = 7 * DAY

SOAK_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "number", "minimum": 0, "maximum": MAX_SOAK, "description": "seconds"},
        {"type": "string", "pattern": DURATION_PATTERN, "description": "a duration such as 12h or 3d"},
    ],
    "description": "a soak from 0d to 30d inclusive (SOAK-3): seconds, or a duration such as 12h or 3d",
}
SoakSeconds = Annotated[float, WithJsonSchema(SOAK_SCHEMA)]


def check_soak(value: object, *, field: str) -> float:
    seconds = parse_duration(value, field=field)
    if not 0 <= seconds <= MAX_SOAK:
        raise ValueError(f"{field}: soak must be between 0d and 30d inclusive (SOAK-3), got {value!r}")
    return seconds


class PartitionSpec(BaseModel):
    """One manual partition; every criterion that is set must match (Fleet semantics)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    name: str
    max_unavailable: CountOrPercent | None = Field(default=None, alias="maxUnavailable")
    cluster_name: str | None = Field(default=None, alias="clusterName")
    cluster_selector: LabelSelector | None = Field(default=None, alias="clusterSelector")
    cluster_group: str | None = Field(default=None, alias="clusterGroup")
    cluster_group_selector: FleetLabelSelector | None = Field(default=None, alias="clusterGroupSelector")

    @field_validator("max_unavailable", mode="before")
    @classmethod
    def _quantity(cls, value: object) -> object:
        return None if value is None else check_count_or_percent(value, field="maxUnavailable")

    @field_validator("cluster_group_selector", mode="before")
    @classmethod
    def _a_selector(cls, value: object) -> object:
        """Fleet's own fleet.yaml reference nests a `clusterSelector` here, which Fleet ignores (every
        group matches) and so does `FleetLabelSelector`; a plain name is no selector at all."""
        if isinstance(value, str):
            raise ValueError(
                f"clusterGroupSelector: {value!r} is a name, not a label selector; name one group with "
                "clusterGroup, or select groups by label with matchLabels / matchExpressions"
            )
        return value

    def matches(self, *, name: str, labels: Mapping[str, str], groups: Mapping[str, Mapping[str, str]]) -> bool:
        """`groups`: the groups the cluster is in, each with its labels (`fleet.groups_of`)."""
        criteria = (self.cluster_name, self.cluster_selector, self.cluster_group, self.cluster_group_selector)
        if all(c is None for c in criteria):
            return False
        if self.cluster_name is not None and name != self.cluster_name:
            return False
        if self.cluster_selector is not None and not self.cluster_selector.matches(labels):
            return False
        if self.cluster_group is not None and self.cluster_group not in groups:
            return False
        selector = self.cluster_group_selector
        return selector is None or any(selector.matches(group_labels) for group_labels in groups.values())


class RolloutStrategy(BaseModel):
    """Fleet's `rolloutStrategy` block, accepted as it is, plus two optional fields of ours (GATE-6)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    max_unavailable: CountOrPercent = Field(default="100%", alias="maxUnavailable")
    max_unavailable_partitions: CountOrPercent = Field(default=0, alias="maxUnavailablePartitions")
    auto_partition_size: Annotated[int | str, WithJsonSchema(POSITIVE_COUNT_OR_PERCENT_SCHEMA)] = Field(
        default="25%", alias="autoPartitionSize"
    )
    auto_partition_threshold: int = Field(default=200, alias="autoPartitionThreshold", ge=0)
    max_new: int = Field(default=50, alias="maxNew", ge=1)
    partitions: tuple[PartitionSpec, ...] = ()
    max_concurrent: int | None = Field(default=None, alias="maxConcurrent", ge=1)
    max_failures: CountOrPercent | None = Field(default=None, alias="maxFailures")

    @field_validator(
        "max_unavailable", "max_unavailable_partitions", "auto_partition_size", "max_failures", mode="before"
    )
    @classmethod
    def _quantity(cls, value: object, info: object) -> object:
        name = getattr(info, "field_name", "value")
        alias = {
            "max_unavailable": "maxUnavailable",
            "max_unavailable_partitions": "maxUnavailablePartitions",
            "auto_partition_size": "autoPartitionSize",
            "max_failures": "maxFailures",
        }.get(name, name)
        return None if value is None else check_count_or_percent(value, field=alias)

    @field_validator("auto_partition_size")
    @classmethod
    def _size_not_zero(cls, value: CountOrPercent) -> CountOrPercent:
        if resolve(value, 1_000_000) == 0:
            raise ValueError("autoPartitionSize resolves to 0 clusters per partition")
        return value

    @field_validator("partitions")
    @classmethod
    def _unique_partition_names(cls, value: tuple[PartitionSpec, ...]) -> tuple[PartitionSpec, ...]:
        seen: set[str] = set()
        for part in value:
            if part.name in seen:
                raise ValueError(f"partition name {part.name!r} is used twice")
            seen.add(part.name)
        return value


def _check_problem(error: Any, checks: object) -> str:
    """One error of a stage's `checks` as a sentence: which check (by name when it has one), which
    field, and what is wrong."""
    message = str(error["msg"]).removeprefix("Value error, ")
    if message.startswith("check "):
        return message
    index, *field = error["loc"] or ("",)
    if not isinstance(index, int):
        return f"checks: {message}"
    raw = checks[index] if isinstance(checks, list | tuple) else None
    name = raw.get("name") if isinstance(raw, dict) else None
    where = f"check {name!r}" if isinstance(name, str) else f"checks.{index}"
    return f"{where}: {'.'.join(str(part) for part in field) or 'value'}: {message}"


def _one_of(*names: str) -> dict[str, Any]:
    """JSON Schema for "exactly one of these is set" (a null counts as unset, as in the model)."""
    return {"oneOf": [{"required": [name], "properties": {name: {"not": {"type": "null"}}}} for name in names]}


class Stage(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        populate_by_name=True,
        json_schema_extra=_one_of("clusterSelector", "clusterNames", "clusterGroup"),
    )

    name: str
    upstream: str | None = None
    cluster_selector: LabelSelector | None = Field(default=None, alias="clusterSelector")
    cluster_names: tuple[str, ...] | None = Field(default=None, alias="clusterNames")
    cluster_group: str | None = Field(default=None, alias="clusterGroup")
    soak: SoakSeconds = DEFAULT_SOAK
    soak_overrides: dict[VersionText, SoakSeconds] = Field(
        default_factory=dict, alias="soakOverrides", json_schema_extra={"additionalProperties": False}
    )
    rollout_strategy: RolloutStrategy = Field(default_factory=RolloutStrategy, alias="rolloutStrategy")
    # CHK-2. Left out of a dump when empty, so a sequence without checks reads and writes exactly
    # as before the field existed (snapshots, sequence comparisons).
    checks: tuple[Check, ...] = Field(default=(), exclude_if=lambda checks: not checks)
    # CHK-1, left out of a dump when no gate is set (as `checks`)
    approval: Approval = Field(default_factory=Approval, exclude_if=lambda approval: not approval.any)
    # CHK-3: a track of the stage starts a version only inside this window; None: any time
    start_window: MaintenanceWindow | None = Field(
        default=None, alias="startWindow", exclude_if=lambda window: window is None
    )
    # CHK-4: overrides the sequence's field by field; None: the sequence's (left out of a dump)
    min_upgrade_interval: MinUpgradeInterval | None = Field(
        default=None, alias="minUpgradeInterval", exclude_if=lambda interval: interval is None
    )

    @field_validator("checks", mode="wrap")
    @classmethod
    def _checks(cls, value: object, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> object:
        """The errors of a stage's checks name the stage (a check's own errors name the check)."""
        stage = info.data.get("name", "?")
        try:
            checks: tuple[Check, ...] = handler(value)
        except ValidationError as exc:
            problems = "; ".join(_check_problem(error, value) for error in exc.errors())
            raise ValueError(f"stage {stage!r}: {problems}") from None
        names = [check.name for check in checks]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"stage {stage!r}: check {name!r} is defined twice")
        return checks

    @field_validator("soak", mode="before")
    @classmethod
    def _soak(cls, value: object) -> float:
        return check_soak(value, field="soak")

    @field_validator("soak_overrides", mode="before")
    @classmethod
    def _overrides(cls, value: object) -> object:
        if not isinstance(value, dict):
            return value
        out = {}
        for version, soak in value.items():
            check_version_text(str(version))
            out[str(version)] = check_soak(soak, field=f"soakOverrides[{version}]")
        return out

    @model_validator(mode="after")
    def _one_membership_rule(self) -> Stage:
        chosen = [
            n
            for n, v in (
                ("clusterSelector", self.cluster_selector),
                ("clusterNames", self.cluster_names),
                ("clusterGroup", self.cluster_group),
            )
            if v is not None
        ]
        if len(chosen) > 1:
            raise ValueError(f"stage {self.name!r}: choose one of {', '.join(chosen)}")
        if not chosen:
            raise ValueError(f"stage {self.name!r}: needs clusterSelector, clusterNames or clusterGroup (SEQ-5)")
        return self

    def selects(self, *, name: str, labels: Mapping[str, str], groups: Collection[str]) -> bool:
        """`groups`: the names of the groups the cluster is in."""
        if self.cluster_names is not None:
            return name in self.cluster_names
        if self.cluster_group is not None:
            return self.cluster_group in groups
        assert self.cluster_selector is not None
        return self.cluster_selector.matches(labels)

    def soak_for(self, version: str) -> float:
        return self.soak_overrides.get(version, self.soak)

    def upgrade_interval(self, sequence: MinUpgradeInterval | None) -> MinUpgradeInterval | None:
        """CHK-4: the disruption budget in force at this stage, given the sequence's."""
        if self.min_upgrade_interval is None:
            return sequence
        return self.min_upgrade_interval.over(sequence)


class Sequence(BaseModel):
    """An ordered, linear list of stages in one channel (SEQ-1..4)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    name: str = "main"
    channel: str = "regular"
    stages: tuple[Stage, ...]
    max_stages: int | None = Field(default=None, alias="maxStages", ge=1)
    # CHK-2: the Prometheus the health service asks this sequence's check queries (its base URL);
    # None: the health service's default. Credentials stay in the service's settings, never here.
    prometheus_url: str | None = Field(
        default=None,
        alias="prometheusUrl",
        json_schema_extra={"pattern": PROMETHEUS_URL_PATTERN},
        exclude_if=lambda url: url is None,
    )
    # CHK-4: the disruption budget of every stage that sets none of its own; None: no minimum
    min_upgrade_interval: MinUpgradeInterval | None = Field(
        default=None, alias="minUpgradeInterval", exclude_if=lambda interval: interval is None
    )

    @field_validator("prometheus_url")
    @classmethod
    def _a_base_url(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(PROMETHEUS_URL_PATTERN.removesuffix(END_OF_TEXT), value):
            raise ValueError(
                f"prometheusUrl: {value!r} is not an http(s) base URL without credentials, such as http://prometheus:9090"
            )
        return value

    @model_validator(mode="after")
    def _linear(self) -> Sequence:
        names = [s.name for s in self.stages]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"stage {name!r} is defined twice (SEQ-1)")
        if self.max_stages is not None and len(self.stages) > self.max_stages:
            raise ValueError(f"{len(self.stages)} stages exceed maxStages {self.max_stages} (SEQ-4)")
        if any(s.upstream is not None for s in self.stages):
            object.__setattr__(self, "stages", _order_by_upstream(self.stages))
        return self


def _order_by_upstream(stages: tuple[Stage, ...]) -> tuple[Stage, ...]:
    """Order stages that name their upstream; reject branches, cycles and unknown names (SEQ-1)."""
    by_name = {s.name: s for s in stages}
    downstream: dict[str, str] = {}
    for stage in stages:
        if stage.upstream is None:
            continue
        if stage.upstream not in by_name:
            raise ValueError(f"stage {stage.name!r}: upstream {stage.upstream!r} is not a stage (SEQ-1)")
        if stage.upstream in downstream:
            raise ValueError(
                f"stage {stage.name!r}: stage {stage.upstream!r} already has downstream "
                f"{downstream[stage.upstream]!r}; a sequence cannot branch (SEQ-1)"
            )
        downstream[stage.upstream] = stage.name
    roots = [s.name for s in stages if s.upstream is None]
    if len(roots) != 1:
        culprit = roots[1] if len(roots) > 1 else stages[0].name
        raise ValueError(f"stage {culprit!r}: a sequence has exactly one first stage (SEQ-1), found {roots or 'none'}")
    ordered = [roots[0]]
    while ordered[-1] in downstream:
        ordered.append(downstream[ordered[-1]])
    missing = [s.name for s in stages if s.name not in ordered]
    if missing:
        raise ValueError(f"stage {missing[0]!r} is part of a cycle (SEQ-1)")
    return tuple(by_name[n] for n in ordered)
