"""Clusters as the inventory describes them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rollout_common.labels import LabelMap
from rollout_common.selector import LabelSelector
from rollout_common.version import Version, VersionText, parse_version, reject_yaml_number
from rollout_common.window import MaintenanceExclusion, MaintenanceWindow

# DNS-1123-ish names keep cluster names safe to pass to drivers as arguments
CLUSTER_NAME = re.compile(r"[a-zA-Z0-9]([a-zA-Z0-9._-]{0,251}[a-zA-Z0-9])?")


class NodePool(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    version: VersionText


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
