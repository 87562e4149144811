"""How a cluster object of the management cluster becomes a `Cluster` of the inventory (pure).

- name: `metadata.name` (names must be unique across the namespaces watched);
- labels: `metadata.labels`, as they are (stage selectors and partitions match them);
- version: `spec.topology.version` (a cluster built from a ClusterClass); else the version its
  `KubeadmControlPlane` (`spec.controlPlaneRef`) runs: `status.version`, the lowest version of its
  machines, or `spec.version` before the control plane has reported one; else the annotation
  `rollout/version` (control planes of other providers, whose objects the watcher does not read);
  without Kubernetes' leading `v` (`v1.30.2` is our `1.30.2`). A cluster with none of them is not
  in the inventory (nothing to compare a target with);
- nodeVersion: the annotation `rollout/node-version` (default: the control plane's);
- channel: the annotation, else the label, `rollout/channel` (default `regular`);
- group: the annotation `rollout/group` naming a Fleet ClusterGroup, else the first (by name) of
  the ClusterGroups of the cluster's namespace whose selector matches the cluster's labels, as
  Fleet decides membership; groupLabels are that group's labels (clusterGroupSelector, SEQ-5);
- maintenanceWindow: the annotation `rollout/maintenance-window`, JSON
  (`{"start": "...", "duration": "4h", ...}` as in the inventory file);
- deprecatedApiUsage: the annotation `rollout/deprecated-api-usage` = `true`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from rollout_common.fleet import Cluster
from rollout_common.selector import LabelSelector

KUBEADM_CONTROL_PLANE = "KubeadmControlPlane"
CONTROL_PLANE_GROUP = "controlplane.cluster.x-k8s.io"
PREFIX = "rollout/"
VERSION = PREFIX + "version"
NODE_VERSION = PREFIX + "node-version"
CHANNEL = PREFIX + "channel"
GROUP = PREFIX + "group"
MAINTENANCE_WINDOW = PREFIX + "maintenance-window"
DEPRECATED_API_USAGE = PREFIX + "deprecated-api-usage"


@dataclass(frozen=True, slots=True)
class ClusterSource:
    """What the mapping reads of a cluster object: small enough to keep in a checkpoint."""

    name: str
    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    topology_version: str | None = None
    # (namespace, name) of the KubeadmControlPlane `spec.controlPlaneRef` names, if it names one
    control_plane: tuple[str, str] | None = None

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> ClusterSource:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        version = (spec.get("topology") or {}).get("version")
        namespace = str(meta.get("namespace", ""))
        return cls(
            name=str(meta.get("name", "")),
            namespace=namespace,
            labels=dict(meta.get("labels") or {}),
            annotations=dict(meta.get("annotations") or {}),
            topology_version=str(version) if version else None,
            control_plane=_kubeadm_control_plane(spec.get("controlPlaneRef"), namespace),
        )


def _kubeadm_control_plane(ref: Any, namespace: str) -> tuple[str, str] | None:
    """The KubeadmControlPlane a Cluster's controlPlaneRef names (its namespace defaults to the Cluster's)."""
    if not isinstance(ref, Mapping) or ref.get("kind") != KUBEADM_CONTROL_PLANE or not ref.get("name"):
        return None
    if str(ref.get("apiVersion", "")).split("/")[0] != CONTROL_PLANE_GROUP:
        return None
    return (str(ref.get("namespace") or namespace), str(ref["name"]))


def control_plane_version(obj: Mapping[str, Any]) -> str | None:
    """What a KubeadmControlPlane runs: `status.version` is the lowest version of its machines
    (Cluster API v1beta1); `spec.version` is only what it should run, so it stands in only while the
    controller has not reported a version yet (a control plane being created)."""
    running = (obj.get("status") or {}).get("version")
    desired = (obj.get("spec") or {}).get("version")
    version = running or desired
    return str(version) if version else None


@dataclass(frozen=True, slots=True)
class GroupSource:
    """A Fleet ClusterGroup: its labels and the selector that decides its members."""

    name: str
    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)
    selector: LabelSelector | None = None

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> GroupSource:
        meta = obj.get("metadata") or {}
        raw = (obj.get("spec") or {}).get("selector")
        try:
            selector = None if raw is None else LabelSelector.model_validate(raw)
        except ValidationError:
            # A selector we cannot read selects nothing, rather than everything.
            selector = None
        return cls(
            name=str(meta.get("name", "")),
            namespace=str(meta.get("namespace", "")),
            labels=dict(meta.get("labels") or {}),
            selector=selector,
        )

    def selects(self, labels: Mapping[str, str]) -> bool:
        # Fleet: a group without a selector has no members.
        return self.selector is not None and self.selector.matches(labels)


@dataclass(frozen=True, slots=True)
class Unmapped:
    """A cluster object that cannot be in the inventory, and why (logged, not published)."""

    name: str
    reason: str


def _group(source: ClusterSource, groups: Iterable[GroupSource]) -> GroupSource | None:
    same_namespace = sorted((g for g in groups if g.namespace == source.namespace), key=lambda g: g.name)
    named = source.annotations.get(GROUP)
    if named is not None:
        return next((g for g in same_namespace if g.name == named), GroupSource(name=named, namespace=source.namespace))
    return next((g for g in same_namespace if g.selects(source.labels)), None)


def _pick(source: ClusterSource, key: str) -> str | None:
    return source.annotations.get(key, source.labels.get(key))


def ours(version: str) -> str:
    """A Kubernetes version as the inventory writes it: `v1.30.2` -> `1.30.2`."""
    return version[1:] if version.startswith("v") else version


def to_cluster(
    source: ClusterSource,
    groups: Iterable[GroupSource] = (),
    control_planes: Mapping[tuple[str, str], str | None] | None = None,
) -> Cluster | Unmapped:
    running = None if source.control_plane is None else (control_planes or {}).get(source.control_plane)
    version = source.topology_version or running or source.annotations.get(VERSION)
    if not version:
        return Unmapped(
            source.name, f"no spec.topology.version, no version on a KubeadmControlPlane and no {VERSION} annotation"
        )
    group = _group(source, groups)
    fields: dict[str, Any] = {
        "name": source.name,
        "labels": dict(source.labels),
        "version": ours(version),
        "channel": _pick(source, CHANNEL) or "regular",
        "group": group.name if group else None,
        "groupLabels": dict(group.labels) if group else {},
        "deprecatedApiUsage": source.annotations.get(DEPRECATED_API_USAGE, "").lower() == "true",
    }
    if node_version := source.annotations.get(NODE_VERSION):
        fields["nodeVersion"] = ours(node_version)
    try:
        if window := source.annotations.get(MAINTENANCE_WINDOW):
            fields["maintenanceWindow"] = json.loads(window)
        return Cluster.model_validate(fields)
    except (ValidationError, ValueError) as exc:
        first = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        return Unmapped(source.name, f"does not map to an inventory cluster: {first}")
