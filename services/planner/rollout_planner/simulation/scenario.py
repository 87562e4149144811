"""The scenario file (shared conformance FORMAT): a fleet, a sequence, a simulated world, a script."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from rollout_common.duration import parse_duration
from rollout_common.fleet import Cluster, ClusterGroup
from rollout_common.gates import GatePosition
from rollout_common.sequence import Sequence, check_soak
from rollout_common.status import Track
from rollout_common.version import parse_minor, parse_version, reject_yaml_number

DEFAULT_START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


def _seconds(value: object, field: str) -> float:
    return parse_duration(value, field=field)


class UpgradeDurations(_Model):
    control_plane: float = Field(default=600.0, alias="controlPlane")
    nodes: float = 1800.0

    @field_validator("control_plane", "nodes", mode="before")
    @classmethod
    def _d(cls, v: object) -> float:
        return _seconds(v, "upgradeDuration")


class NotReadyWindow(_Model):
    cluster: str
    start: float = Field(alias="from")
    until: float

    @field_validator("start", "until", mode="before")
    @classmethod
    def _d(cls, v: object) -> float:
        return _seconds(v, "notReady")


class Failure(_Model):
    cluster: str
    track: Track = Track.CONTROL_PLANE


class MetricSpan(_Model):
    """CHK-2: what a query returns from `from` until `until` (seconds since the start)."""

    query: str = Field(min_length=1)
    start: float = Field(alias="from")
    until: float
    value: float

    @field_validator("start", "until", mode="before")
    @classmethod
    def _d(cls, v: object) -> float:
        return _seconds(v, "metrics")


class Simulation(_Model):
    upgrade_duration: UpgradeDurations = Field(default_factory=UpgradeDurations, alias="upgradeDuration")
    ready_after: float = Field(default=60.0, alias="readyAfter")
    not_ready: tuple[NotReadyWindow, ...] = Field(default=(), alias="notReady")
    failures: tuple[Failure, ...] = ()
    metrics: tuple[MetricSpan, ...] = ()

    def metric(self, query: str, t: float) -> float | None:
        """FORMAT: the first entry for exactly this query with from <= t < until; None: no data."""
        return next((m.value for m in self.metrics if m.query == query and m.start <= t < m.until), None)

    @field_validator("ready_after", mode="before")
    @classmethod
    def _d(cls, v: object) -> float:
        return _seconds(v, "readyAfter")


class ReleaseSpec(_Model):
    channel: str = "regular"
    targets: dict[str, str] = Field(min_length=1)
    id: str | None = None

    @field_validator("targets", mode="before")
    @classmethod
    def _targets(cls, value: object) -> object:
        if not isinstance(value, dict):
            return value
        out = {}
        for minor, version in value.items():
            reject_yaml_number(minor, what="minor")
            reject_yaml_number(version, what="version")
            parse_minor(str(minor))
            parse_version(str(version))
            out[str(minor)] = str(version)
        return out


class StartSpec(_Model):
    version: str
    tracks: tuple[Track, ...] = (Track.CONTROL_PLANE, Track.NODES)

    @field_validator("version")
    @classmethod
    def _v(cls, value: str) -> str:
        parse_version(value)
        return value


class SoakOverrideSpec(_Model):
    stage: str
    version: str
    soak: float | None = None

    @field_validator("soak", mode="before")
    @classmethod
    def _soak(cls, value: object) -> object:
        return None if value is None else check_soak(value, field="soak")


class RetrySpec(_Model):
    """OPS-4: one cluster's, one stage's, or (neither given) every failed upgrade."""

    cluster: str | None = None
    stage: str | None = None


class ApproveSpec(_Model):
    """CHK-1: the approval of one gate of one stage, for every rollout waiting there."""

    stage: str
    gate: GatePosition
    by: str | None = None
    comment: str | None = None


_ACTIONS = ("pause", "resume", "cancel", "soak_override", "start_rollout", "retry", "approve")
Action = Literal["pause", "resume", "cancel", "soak_override", "start_rollout", "retry", "approve"]
_ONE_OF = "a command is exactly one of pause, resume, cancel, soakOverride, startRollout, retry, approve"


class CommandSpec(_Model):
    pause: dict[str, Any] | None = None
    resume: dict[str, Any] | None = None
    cancel: dict[str, Any] | None = None
    soak_override: SoakOverrideSpec | None = Field(default=None, alias="soakOverride")
    start_rollout: StartSpec | None = Field(default=None, alias="startRollout")
    retry: RetrySpec | None = None
    approve: ApproveSpec | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> CommandSpec:
        chosen = [k for k in _ACTIONS if getattr(self, k) is not None]
        if len(chosen) != 1:
            raise ValueError(_ONE_OF)
        return self

    @property
    def action(self) -> Action:
        for key in _ACTIONS:
            if getattr(self, key) is not None:
                return key  # type: ignore[return-value]
        raise ValueError(_ONE_OF)


class InventorySpec(_Model):
    upsert: Cluster | None = None
    remove: str | None = None


class HealthSpec(_Model):
    cluster: str
    ready: bool


class ScriptEvent(_Model):
    at: float
    release_target: ReleaseSpec | None = Field(default=None, alias="releaseTarget")
    command: CommandSpec | None = None
    start_rollout: StartSpec | None = Field(default=None, alias="startRollout")
    inventory: InventorySpec | None = None
    sequence: Sequence | None = None  # SEQ-7: the changed definition

    @field_validator("at", mode="before")
    @classmethod
    def _at(cls, v: object) -> float:
        return _seconds(v, "at")


class Scenario(_Model):
    name: str
    start: dt.datetime = DEFAULT_START
    clusters: tuple[Cluster, ...] = ()
    generate: tuple[dict[str, Any], ...] = ()
    cluster_groups: tuple[ClusterGroup, ...] = Field(default=(), alias="clusterGroups")
    sequence: Sequence
    simulation: Simulation = Field(default_factory=Simulation)
    events: tuple[ScriptEvent, ...] = ()
    until: float = 60 * 86400.0
    expect: dict[str, Any] | None = None
    _fleet: list[Cluster] | None = PrivateAttr(default=None)

    @field_validator("start")
    @classmethod
    def _utc(cls, value: dt.datetime) -> dt.datetime:
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)

    @field_validator("until", mode="before")
    @classmethod
    def _until(cls, v: object) -> float:
        return _seconds(v, "until")

    def fleet(self) -> list[Cluster]:
        """Explicit clusters, then generated ones (FORMAT: `name` is a Python format with i from 1)."""
        if self._fleet is None:
            self._fleet = self._expand()
        return list(self._fleet)

    def _expand(self) -> list[Cluster]:
        out = list(self.clusters)
        for index, template in enumerate(self.generate):
            fields = {k: v for k, v in template.items() if k not in ("count", "name")}
            count = template.get("count")
            pattern = template.get("name")
            if not isinstance(count, int) or count < 0 or not isinstance(pattern, str):
                raise ValueError(f"generate[{index}]: needs an integer count >= 0 and a name pattern")
            for i in range(1, count + 1):
                out.append(Cluster.model_validate({**fields, "name": _generated_name(pattern, i, index)}))
        seen: set[str] = set()
        for cluster in out:
            if cluster.name in seen:
                raise ValueError(f"cluster {cluster.name} is defined twice")
            seen.add(cluster.name)
        return out


def _generated_name(pattern: str, i: int, index: int) -> str:
    try:
        return pattern.format(i=i)
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"generate.{index}.name: {pattern!r} is not a name pattern with {{i}} ({exc!r})") from exc


class ScenarioError(ValueError):
    """A scenario that cannot be read; the text lists every problem with its field."""


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """The parser's complaint on one line, with where it is; its multi-line text quotes the
    offending line, which can be blank (a tab, say) and read as an empty problem."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"line {mark.line + 1}, column {mark.column + 1}: {exc.problem or exc.context}"
    return " ".join(str(exc).split())


def load_scenario(path: Path) -> Scenario:
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path}: not valid YAML: {_yaml_problem(exc)}") from exc
    if not isinstance(raw, dict):
        raise ScenarioError(f"{path}: expected a mapping at the top level")
    raw.setdefault("name", path.stem)  # a plain sequence-and-fleet file needs no scenario name
    try:
        scenario = Scenario.model_validate(raw)
        scenario.fleet()
    except ValidationError as exc:
        raise ScenarioError(format_validation(path, exc)) from exc
    except ValueError as exc:
        raise ScenarioError(f"{path}: {exc}") from exc
    return scenario


def format_validation(path: Path, exc: ValidationError) -> str:
    lines = [f"{path}: {exc.error_count()} problem(s)"]
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "(top level)"
        message = error["msg"].removeprefix("Value error, ")
        lines.append(f"  - {where}: {message}")
    return "\n".join(lines)
