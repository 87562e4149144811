"""The inventory watcher: lists and watches the cluster objects of a management cluster (Cluster
API `Cluster` with the `KubeadmControlPlane`s their versions are read from, or Fleet `Cluster`)
and, optionally, Fleet `ClusterGroup`s, and publishes every
change that matters to the inventory (an add, a label, version, channel or group change, a
deletion) as an `InventoryChange` on rollout.inventory (SEQ-6).

Each watch resumes from the last resourceVersion it saw (after a dropped connection, and after a
restart when a checkpoint file is kept); a `410 Gone` (that version is older than the server
keeps) makes it list again and publish the difference, removals included. After every change it
maps the whole set again (a ClusterGroup change can move many clusters) and publishes only what
differs from what it last published, so status-only updates publish nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Mapping
from enum import Enum
from typing import Any

from lightkube import ALL_NS, AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import GenericNamespacedResource

from rollout_adapters.kube.client import translate
from rollout_adapters.kube.resources import CapiCluster, FleetCluster, FleetClusterGroup, KubeadmControlPlane
from rollout_common.envelope import encode
from rollout_common.errors import PermanentError, RolloutError
from rollout_common.events import InventoryChange
from rollout_common.fleet import Cluster
from rollout_common.ports import Bus
from rollout_common.topics.catalog import INVENTORY
from rollout_health.inventory.checkpoint import Checkpoint, WatchState
from rollout_health.inventory.mapping import (
    ClusterSource,
    GroupSource,
    Unmapped,
    control_plane_version,
    to_cluster,
)

log = logging.getLogger("rollout_health.inventory")


class ClusterKind(str, Enum):
    CLUSTER_API = "cluster-api"
    FLEET = "fleet"


class Stream(str, Enum):
    CLUSTERS = "clusters"
    GROUPS = "groups"
    CONTROL_PLANES = "control_planes"


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace", "")), str(meta.get("name", "")))


def _as_dict(obj: Any) -> Mapping[str, Any]:
    result: Mapping[str, Any] = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
    return result


def _resources(
    kind: ClusterKind, *, groups: bool, control_planes: bool
) -> dict[Stream, type[GenericNamespacedResource]]:
    """The resource each stream watches: the clusters always, the others when asked for."""
    resources: dict[Stream, type[GenericNamespacedResource]] = {
        Stream.CLUSTERS: CapiCluster if kind is ClusterKind.CLUSTER_API else FleetCluster
    }
    if groups:
        resources[Stream.GROUPS] = FleetClusterGroup
    if control_planes and kind is ClusterKind.CLUSTER_API:
        # the version a Cluster runs is its control plane's (no ClusterClass topology to read)
        resources[Stream.CONTROL_PLANES] = KubeadmControlPlane
    return resources


class InventoryWatcher:
    def __init__(
        self,
        *,
        client: AsyncClient,
        bus: Bus,
        topic_prefix: str = "",
        kind: ClusterKind = ClusterKind.CLUSTER_API,
        namespace: str | None = None,
        watch_groups: bool = False,
        watch_control_planes: bool = True,
        checkpoint: Checkpoint | None = None,
        watch_timeout_s: int = 300,
        retry_s: float = 2.0,
        source_id: str = "inventory-watcher",
    ) -> None:
        self._client = client
        self._bus = bus
        self._topic = topic_prefix + INVENTORY.name
        self._resources = _resources(kind, groups=watch_groups, control_planes=watch_control_planes)
        self._namespace = namespace or ALL_NS
        self._checkpoint = checkpoint
        self._watch_timeout_s = watch_timeout_s
        self._retry_s = retry_s
        self._source_id = source_id
        self.state = checkpoint.load() if checkpoint is not None else WatchState()
        self._lock = asyncio.Lock()
        self._unmapped: dict[str, str] = {}
        self.relists = 0
        self.synced = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        """Watch every stream until `stop` is set; a permanent error (RBAC, a missing CRD) ends it."""
        tasks = [asyncio.create_task(self._follow(stream), name=f"watch-{stream.value}") for stream in self._resources]
        stopper = asyncio.create_task(stop.wait())
        try:
            done, _ = await asyncio.wait([*tasks, stopper], return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task is not stopper:
                    task.result()  # raises what ended a watch
        finally:
            for task in (*tasks, stopper):
                task.cancel()
            for task in (*tasks, stopper):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def _follow(self, stream: Stream) -> None:
        resource = self._resources[stream]
        while True:
            try:
                if self.state.resource_versions.get(stream.value) is None:
                    await self._relist(stream, resource)
                if all(self.state.resource_versions.get(s.value) for s in self._resources):
                    self.synced.set()
                watch = self._client.watch(
                    resource,
                    namespace=self._namespace,
                    resource_version=self.state.resource_versions[stream.value],
                    server_timeout=self._watch_timeout_s,
                )
                async for event_type, obj in watch:
                    await self._on_event(stream, event_type, _as_dict(obj))
            except ApiError as exc:
                if exc.status.code == 410:
                    log.info("%s: resourceVersion expired (410 Gone); listing again", stream.value)
                    self.state.resource_versions[stream.value] = None
                    continue
                await self._failed(stream, translate(exc, doing=f"watching {stream.value}"))
            except RolloutError as exc:
                await self._failed(stream, exc)
            except Exception as exc:
                await self._failed(stream, translate(exc, doing=f"watching {stream.value}"))

    async def _failed(self, stream: Stream, error: Exception) -> None:
        if isinstance(error, PermanentError):
            log.error("%s: cannot watch: %s", stream.value, error)
            raise error
        log.warning("%s: %s; resuming in %.0f s", stream.value, error, self._retry_s)
        await asyncio.sleep(self._retry_s)

    async def _relist(self, stream: Stream, resource: type[GenericNamespacedResource]) -> None:
        listing = self._client.list(resource, namespace=self._namespace)
        objects = [_as_dict(obj) async for obj in listing]
        self.relists += 1
        async with self._lock:
            if stream is Stream.CLUSTERS:
                sources = (ClusterSource.from_object(o) for o in objects)
                self.state.clusters = {(s.namespace, s.name): s for s in sources}
            elif stream is Stream.CONTROL_PLANES:
                self.state.control_planes = {_key(o): control_plane_version(o) for o in objects}
            else:
                groups = (GroupSource.from_object(o) for o in objects)
                self.state.groups = {(g.namespace, g.name): g for g in groups}
            self.state.resource_versions[stream.value] = listing.resourceVersion
            await self._publish_differences()
            self._save()
        log.info("%s: listed %d object(s) at resourceVersion %s", stream.value, len(objects), listing.resourceVersion)

    async def _on_event(self, stream: Stream, event_type: str, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = _key(obj)
        async with self._lock:
            if event_type == "BOOKMARK":
                pass
            elif stream is Stream.CONTROL_PLANES and event_type == "DELETED":
                self.state.control_planes.pop(key, None)
            elif stream is Stream.CONTROL_PLANES:
                self.state.control_planes[key] = control_plane_version(obj)
            elif stream is Stream.CLUSTERS and event_type == "DELETED":
                self.state.clusters.pop(key, None)
            elif stream is Stream.CLUSTERS:
                self.state.clusters[key] = ClusterSource.from_object(obj)
            elif event_type == "DELETED":
                self.state.groups.pop(key, None)
            else:
                self.state.groups[key] = GroupSource.from_object(obj)
            self.state.resource_versions[stream.value] = str(meta.get("resourceVersion") or "") or None
            await self._publish_differences()
            # Saved only after publishing: a crash in between replays the event rather than losing it.
            self._save()

    def _mapped(self) -> dict[str, Cluster]:
        mapped: dict[str, Cluster] = {}
        groups = list(self.state.groups.values())
        for (namespace, name), source in sorted(self.state.clusters.items()):
            result = to_cluster(source, groups, self.state.control_planes)
            if isinstance(result, Unmapped):
                if self._unmapped.get(name) != result.reason:
                    log.warning("cluster %s/%s left out of the inventory: %s", namespace, name, result.reason)
                self._unmapped[name] = result.reason
                continue
            self._unmapped.pop(name, None)
            if name in mapped:
                log.warning("cluster name %s is in several namespaces; %s/%s is left out", name, namespace, name)
                continue
            mapped[name] = result
        return mapped

    async def _publish_differences(self) -> None:
        # Not before every stream has listed: a cluster listed before its ClusterGroups would be
        # published without its group first, and then again with it.
        if not all(self.state.resource_versions.get(stream.value) for stream in self._resources):
            return
        mapped = self._mapped()
        published = self.state.published
        for name, cluster in mapped.items():
            if published.get(name) != cluster:
                await self._publish(InventoryChange(action="upsert", cluster=cluster), key=name)
                published[name] = cluster
                log.info("published cluster %s (version %s, labels %s)", name, cluster.version, dict(cluster.labels))
        for name in sorted(set(published) - set(mapped)):
            await self._publish(InventoryChange(action="remove", name=name), key=name)
            del published[name]
            log.info("published the removal of cluster %s", name)

    async def _publish(self, change: InventoryChange, *, key: str) -> None:
        """Publish, retrying while the broker is unreachable: a change is never dropped."""
        event_id = f"inventory-{key}-{uuid.uuid4().hex[:12]}"
        value, headers = encode(change, event_id=event_id, source=self._source_id, at=time.time())
        while True:
            try:
                await self._bus.publish(self._topic, key=key.encode(), value=value, headers=headers)
                return
            except PermanentError:
                raise
            except RolloutError as exc:
                log.warning("inventory change of %s not published yet, retrying: %s", key, exc)
                await asyncio.sleep(self._retry_s)

    def _save(self) -> None:
        if self._checkpoint is not None:
            self._checkpoint.save(self.state)
