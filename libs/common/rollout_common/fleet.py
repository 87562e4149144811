"""Clusters as the inventory describes them."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, WithJsonSchema, field_validator, model_validator

from rollout_common.labels import LabelMap
from rollout_common.selector import LabelSelector
from rollout_common.version import Version, VersionText, parse_version, reject_yaml_number
from rollout_common.window import MaintenanceExclusion, MaintenanceWindow

END_OF_TEXT = r"(?![\s\S])"
# DNS-1123-ish names keep cluster names safe to pass to drivers as arguments
CLUSTER_NAME = re.compile(r"[a-zA-Z0-9]([a-zA-Z0-9._-]{0,251}[a-zA-Z0-9])?")


class NodePool(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    version: VersionText


# RFC 3339 with its zone, as JSON carries a time; the model checks the date itself
UPGRADE_TIME_PATTERN = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})(?![\s\S])"
)
UpgradeTime = Annotated[
    dt.datetime,
    WithJsonSchema({"type": "string", "format": "date-time", "pattern": UPGRADE_TIME_PATTERN}),
]


class LastUpgrade(BaseModel):
    """CHK-4: when each track's last upgrade finished, as the inventory knows it (before this system
    upgraded it, or done outside it). A track left out has no known last upgrade."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    control_plane: UpgradeTime | None = Field(default=None, alias="controlPlane")
    nodes: UpgradeTime | None = None

    @field_validator("control_plane", "nodes", mode="before")
    @classmethod
    def _a_time_with_its_zone(cls, value: object, info: ValidationInfo) -> object:
        """A text time only as RFC 3339 with its zone (no epoch numbers, no bare dates), as the schema says;
        a YAML timestamp arrives parsed already."""
        if value is None or isinstance(value, dt.datetime):
            return value
        if isinstance(value, str) and re.fullmatch(UPGRADE_TIME_PATTERN.removesuffix(END_OF_TEXT), value):
            return value
        name = "controlPlane" if info.field_name == "control_plane" else "nodes"
        raise ValueError(f"lastUpgrade.{name}: {value!r} is not a time such as 2025-12-20T00:00:00Z")

    @field_validator("control_plane", "nodes")
    @classmethod
    def _utc(cls, value: dt.datetime | None) -> dt.datetime | None:
        """A YAML timestamp without a zone is UTC, as every time of the inventory."""
        if value is None or value.tzinfo is not None:
            return value
        return value.replace(tzinfo=dt.UTC)

    def epochs(self) -> tuple[float | None, float | None]:
        """(control plane, nodes) in epoch seconds, the engine's time."""
        cp, nodes = self.control_plane, self.nodes
        return (None if cp is None else cp.timestamp(), None if nodes is None else nodes.timestamp())


class Cluster(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    name: str = Field(json_schema_extra={"pattern": f"^{CLUSTER_NAME.pattern}(?![\\s\\S])"})
    labels: LabelMap = Field(default_factory=dict)
    channel: str = "regular"
    version: VersionText
    node_version: VersionText | None = Field(default=None, alias="nodeVersion")
    node_pools: tuple[NodePool, ...] = Field(default=(), alias="nodePools")
    group: str | None = None
    group_labels: LabelMap = Field(default_factory=dict, alias="groupLabels")
    maintenance_window: MaintenanceWindow | None = Field(default=None, alias="maintenanceWindow")
    exclusions: tuple[MaintenanceExclusion, ...] = ()
    deprecated_api_usage: bool = Field(default=False, alias="deprecatedApiUsage")
    # CHK-4, left out of a dump when unknown (so records without it read and write as before)
    last_upgrade: LastUpgrade | None = Field(default=None, alias="lastUpgrade", exclude_if=lambda last: last is None)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not CLUSTER_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not a valid cluster name (letters, digits, '.', '_', '-')")
        return value

    @field_validator("version", "node_version", mode="before")
    @classmethod
    def _not_a_number(cls, value: object) -> object:
        return reject_yaml_number(value, what="version")

    @model_validator(mode="after")
    def _nodes_not_above_control_plane(self) -> Cluster:
        if self.nodes > self.control_plane:
            raise ValueError(f"nodeVersion {self.nodes} is newer than the control plane {self.version}")
        return self

    @property
    def control_plane(self) -> Version:
        return parse_version(self.version)

    @property
    def nodes(self) -> Version:
        """The node track's version: the oldest node pool, so every pool is brought up to the target."""
        if self.node_pools:
            return min(parse_version(p.version) for p in self.node_pools)
        return parse_version(self.node_version or self.version)


class ClusterGroup(BaseModel):
    """A named set of clusters with labels of its own, as Fleet's ClusterGroup: its `selector` picks
    its clusters by their labels, and partitions' `clusterGroupSelector` picks groups by these labels.

    Without a selector it holds no cluster; an empty selector (`{}`) holds every cluster.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    name: str = Field(min_length=1)
    labels: LabelMap = Field(default_factory=dict)
    selector: LabelSelector | None = None

    def contains(self, cluster: Grouped) -> bool:
        return self.selector is not None and self.selector.matches(cluster.labels)


class Grouped(Protocol):
    """What group membership reads of a cluster: a Cluster, or a planner's compact record of one."""

    @property
    def labels(self) -> Mapping[str, str]: ...

    @property
    def group(self) -> str | None: ...

    @property
    def group_labels(self) -> Mapping[str, str]: ...


def groups_of(cluster: Grouped, groups: Iterable[ClusterGroup]) -> dict[str, Mapping[str, str]]:
    """The groups a cluster is in, each with its labels: inventory groups whose selector holds it,
    and the group named on the cluster itself (`group`, `groupLabels`)."""
    found: dict[str, Mapping[str, str]] = {g.name: g.labels for g in groups if g.contains(cluster)}
    if cluster.group is not None:
        found[cluster.group] = {**found.get(cluster.group, {}), **cluster.group_labels}
    return found
