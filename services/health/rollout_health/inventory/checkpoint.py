"""What the inventory watcher knows, and a file that keeps it across restarts.

With it, a restarted watcher resumes each watch from its last resourceVersion, and still knows
which clusters it published: a cluster deleted while it was down is removed once it lists again.
Without it, a restart lists everything and publishes every cluster again (upserts are idempotent),
but cannot tell the planner about a deletion it did not see.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rollout_common.fleet import Cluster
from rollout_common.selector import LabelSelector
from rollout_health.inventory.mapping import ClusterSource, GroupSource

log = logging.getLogger("rollout_health.inventory")

Key = tuple[str, str]  # (namespace, name)


@dataclass
class WatchState:
    resource_versions: dict[str, str | None] = field(default_factory=dict)
    clusters: dict[Key, ClusterSource] = field(default_factory=dict)
    groups: dict[Key, GroupSource] = field(default_factory=dict)
    published: dict[str, Cluster] = field(default_factory=dict)
    control_planes: dict[Key, str | None] = field(default_factory=dict)  # KubeadmControlPlane -> its version


def _cluster_source(raw: dict[str, Any]) -> ClusterSource:
    return ClusterSource(
        name=raw["name"],
        namespace=raw["namespace"],
        labels=raw.get("labels", {}),
        annotations=raw.get("annotations", {}),
        topology_version=raw.get("topology_version"),
        control_plane=None if raw.get("control_plane") is None else (raw["control_plane"][0], raw["control_plane"][1]),
    )


def _group_source(raw: dict[str, Any]) -> GroupSource:
    selector = raw.get("selector")
    return GroupSource(
        name=raw["name"],
        namespace=raw["namespace"],
        labels=raw.get("labels", {}),
        selector=None if selector is None else LabelSelector.model_validate(selector),
    )


class Checkpoint:
    """A JSON file, replaced atomically on every save."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> WatchState:
        try:
            raw = json.loads(self.path.read_text())
            return WatchState(
                resource_versions=dict(raw["resource_versions"]),
                clusters={(c["namespace"], c["name"]): _cluster_source(c) for c in raw["clusters"]},
                groups={(g["namespace"], g["name"]): _group_source(g) for g in raw["groups"]},
                published={c["name"]: Cluster.model_validate(c) for c in raw["published"]},
                # absent in checkpoints written before control planes were watched
                control_planes={(p["namespace"], p["name"]): p["version"] for p in raw.get("control_planes", [])},
            )
        except FileNotFoundError:
            return WatchState()
        except (OSError, ValueError, KeyError, TypeError, ValidationError) as exc:
            # Listing again is always safe; only removals while we were down may be missed.
            log.warning("inventory checkpoint %s unreadable, starting from a full list: %s", self.path, exc)
            return WatchState()

    def save(self, state: WatchState) -> None:
        partial = self.path.with_suffix(self.path.suffix + ".partial")
        partial.write_text(json.dumps(_state_record(state)))
        os.replace(partial, self.path)


def _state_record(state: WatchState) -> dict[str, Any]:
    """The JSON form `Checkpoint.load` reads back."""
    return {
        "resource_versions": state.resource_versions,
        "clusters": [_cluster_record(s) for s in state.clusters.values()],
        "groups": [_group_record(g) for g in state.groups.values()],
        "published": [c.model_dump(mode="json", by_alias=True) for c in state.published.values()],
        "control_planes": [
            {"namespace": ns, "name": name, "version": version} for (ns, name), version in state.control_planes.items()
        ],
    }


def _cluster_record(source: ClusterSource) -> dict[str, Any]:
    return {
        "name": source.name,
        "namespace": source.namespace,
        "labels": dict(source.labels),
        "annotations": dict(source.annotations),
        "topology_version": source.topology_version,
        "control_plane": None if source.control_plane is None else list(source.control_plane),
    }


def _group_record(group: GroupSource) -> dict[str, Any]:
    return {
        "name": group.name,
        "namespace": group.namespace,
        "labels": dict(group.labels),
        "selector": None if group.selector is None else group.selector.model_dump(by_alias=True),
    }
