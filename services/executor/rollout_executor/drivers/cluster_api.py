"""A driver that upgrades through Cluster API objects in a management cluster.

- control plane: the version of the cluster's `KubeadmControlPlane` (`spec.controlPlaneRef`), or,
  for a cluster built from a ClusterClass, `Cluster.spec.topology.version` (Cluster API then rolls
  the control plane and the MachineDeployments itself);
- nodes: `spec.template.spec.version` of every `MachineDeployment` of the cluster (label
  `cluster.x-k8s.io/cluster-name`), or again the topology version.

Each patch is a server-side apply of that one field under this driver's own field manager. When
the field belongs to another manager, what that manager is decides: one that applies (a GitOps
tool, `kubectl apply --server-side`) declares the version and would set it back, so the upgrade
fails with the conflict and the manager's name, for a person to settle; one that only created or
updated the object once (`clusterctl`, `kubectl create`, a controller's update) does not, and the
driver takes the field over (a forced apply of that field alone). Then it waits, polling, until the
status shows the version running and ready:
- KubeadmControlPlane: `status.version` is the target, `status.observedGeneration` has caught up,
  every replica updated and ready, none unavailable;
- MachineDeployment: the template carries the version, `status.observedGeneration` has caught
  up, every replica updated, ready and available.
A cluster already there succeeds at once, without a patch (drivers are idempotent: a redelivered
or retried command must not upgrade twice); `observed_version`, the probe the executor asks before
running an upgrade another executor left unrecorded, is that same check without the patch. A
missing object, an RBAC denial, a conflict or the timeout is a failed outcome whose error says which.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lightkube import AsyncClient
from lightkube.generic_resource import GenericNamespacedResource

from rollout_adapters.kube.client import KubeConflictError, async_client, translate
from rollout_adapters.kube.resources import (
    CAPI_GROUP,
    CAPI_VERSION,
    CLUSTER_NAME_LABEL,
    CONTROL_PLANE_GROUP,
    CapiCluster,
    KubeadmControlPlane,
    MachineDeployment,
)
from rollout_common.errors import InvalidInputError, PermanentError, RolloutError
from rollout_common.status import Track
from rollout_executor.drivers.port import DriverOutcome
from rollout_executor.settings import ClusterApiDriverSettings
from rollout_executor.target import UpgradeTarget, check_cluster_name, check_version

FIELD_MANAGER = "rollout-executor"


def kube_version(version: str) -> str:
    """Our `1.30.2` as Cluster API writes it: `v1.30.2`."""
    return version if version.startswith("v") else f"v{version}"


@dataclass(frozen=True, slots=True)
class _Step:
    """One object to patch and watch: what to apply, and how its readiness reads."""

    resource: type[GenericNamespacedResource]
    name: str
    patch: Mapping[str, Any]
    what: str
    # The version field's path in managedFields' fieldsV1 form.
    field: tuple[str, ...] = ()


def applying_owners(obj: Mapping[str, Any], field: tuple[str, ...]) -> list[str]:
    """The managers other than ours that own `field` through server-side apply."""
    owners = []
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        if entry.get("operation") != "Apply" or entry.get("manager") == FIELD_MANAGER:
            continue
        node: Any = entry.get("fieldsV1") or {}
        for part in field:
            node = node.get(part) if isinstance(node, dict) else None
        if node is not None:
            owners.append(str(entry.get("manager")))
    return owners


def _dict(obj: Any) -> Mapping[str, Any]:
    result: Mapping[str, Any] = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
    return result


def _caught_up(obj: Mapping[str, Any]) -> bool:
    generation = (obj.get("metadata") or {}).get("generation") or 0
    return int((obj.get("status") or {}).get("observedGeneration") or 0) >= int(generation)


def control_plane_ready(obj: Mapping[str, Any], version: str) -> str | None:
    """None when the KubeadmControlPlane runs `version` and is ready; else what is still missing."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    replicas = int(spec.get("replicas") or 1)
    if status.get("version") != version:
        return f"status.version is {status.get('version')!r}"
    if not _caught_up(obj):
        return "status.observedGeneration is behind"
    if int(status.get("updatedReplicas") or 0) < replicas or int(status.get("readyReplicas") or 0) < replicas:
        return f"{status.get('updatedReplicas', 0)} updated / {status.get('readyReplicas', 0)} ready of {replicas}"
    if int(status.get("unavailableReplicas") or 0) > 0:
        return f"{status.get('unavailableReplicas')} unavailable"
    return None


def machines_ready(obj: Mapping[str, Any], version: str) -> str | None:
    """None when the MachineDeployment's machines all run `version` and are ready."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    template_version = ((spec.get("template") or {}).get("spec") or {}).get("version")
    if template_version != version:
        return f"spec.template.spec.version is {template_version!r}"
    if not _caught_up(obj):
        return "status.observedGeneration is behind"
    replicas = 1 if spec.get("replicas") is None else int(spec["replicas"])
    counts = {key: int(status.get(key) or 0) for key in ("updatedReplicas", "readyReplicas", "availableReplicas")}
    if any(count < replicas for count in counts.values()):
        return ", ".join(f"{key} {count}" for key, count in counts.items()) + f" of {replicas}"
    return None


class ClusterApiDriver:
    name = "cluster-api"

    def __init__(self, settings: ClusterApiDriverSettings, *, client: AsyncClient | None = None) -> None:
        self._settings = settings
        self._client = client

    def _kube(self) -> AsyncClient:
        # Made on first use: the executor builds its driver before its event loop runs.
        if self._client is None:
            self._client = async_client(
                kubeconfig=self._settings.kubeconfig, context=self._settings.kube_context, field_manager=FIELD_MANAGER
            )
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()

    async def upgrade(self, target: UpgradeTarget, *, fencing_token: int) -> DriverOutcome:
        # The fencing token is not needed here: every write is a server-side apply of the target's
        # own version under one field manager, so a stale lease holder can only write what the
        # current holder writes, and the wait that follows only reads.
        del fencing_token
        try:
            check_cluster_name(target.cluster)
            version = kube_version(check_version(target.version))
        except InvalidInputError as exc:
            return DriverOutcome(succeeded=False, error=f"rejected: {exc}")
        # What the last look at the status found missing, for the timeout's message.
        progress: list[str] = []
        try:
            async with asyncio.timeout(self._settings.timeout_s):
                steps = await self._steps(target, version)
                pending = [step for step in steps if await self._missing(step, version) is not None]
                if not pending:
                    return DriverOutcome(succeeded=True)  # already there: nothing to patch
                for step in pending:
                    await self._apply(step)
                await self._wait(steps, version, progress)
            return DriverOutcome(succeeded=True)
        except TimeoutError:
            return DriverOutcome(
                succeeded=False,
                error=f"timed out after {self._settings.timeout_s:.0f} s waiting for {target.cluster} "
                f"{target.track.value} to run {version}: {'; '.join(progress) or 'no status read'}",
            )
        except RolloutError as exc:
            return DriverOutcome(succeeded=False, error=str(exc))

    async def _get(self, resource: type[GenericNamespacedResource], name: str, what: str) -> Mapping[str, Any]:
        try:
            return _dict(await self._kube().get(resource, name, namespace=self._settings.namespace))
        except Exception as exc:
            raise translate(exc, doing=f"reading {what}") from exc

    async def observed_version(self, target: UpgradeTarget) -> str | None:
        """The target's version when every object of the track already runs it and is ready (what
        `upgrade` would find done without a patch); None otherwise: this driver only tells whether
        the track is at the target, not which version a track half-way there runs."""
        try:
            check_cluster_name(target.cluster)
            version = kube_version(check_version(target.version))
            async with asyncio.timeout(self._settings.timeout_s):
                steps = await self._steps(target, version)
                missing = [step for step in steps if await self._missing(step, version) is not None]
        except (InvalidInputError, RolloutError, TimeoutError):
            return None
        return None if missing else target.version

    async def _steps(self, target: UpgradeTarget, version: str) -> list[_Step]:
        namespace = self._settings.namespace
        cluster = await self._get(CapiCluster, target.cluster, f"Cluster {namespace}/{target.cluster}")
        spec = cluster.get("spec") or {}
        if spec.get("topology"):
            return [self._topology_step(target, version), *(await self._watched_only(target, spec))]
        if target.track is Track.CONTROL_PLANE:
            return [self._control_plane_step(target, spec, version)]
        return [self._machine_step(name, version) for name in await self._machine_deployments(target.cluster)]

    def _topology_step(self, target: UpgradeTarget, version: str) -> _Step:
        namespace = self._settings.namespace
        patch = {
            "apiVersion": f"{CAPI_GROUP}/{CAPI_VERSION}",
            "kind": "Cluster",
            "metadata": {"name": target.cluster, "namespace": namespace},
            "spec": {"topology": {"version": version}},
        }
        what = f"Cluster {namespace}/{target.cluster} topology"
        return _Step(CapiCluster, target.cluster, patch, what, ("f:spec", "f:topology", "f:version"))

    def _control_plane_step(self, target: UpgradeTarget, spec: Mapping[str, Any], version: str) -> _Step:
        namespace = self._settings.namespace
        ref = spec.get("controlPlaneRef") or {}
        if ref.get("kind") != "KubeadmControlPlane" or not ref.get("name"):
            raise PermanentError(
                f"Cluster {namespace}/{target.cluster} has no KubeadmControlPlane in spec.controlPlaneRef "
                f"(found {ref.get('kind') or 'none'}); only kubeadm control planes are supported"
            )
        name = str(ref["name"])
        patch = {
            "apiVersion": f"{CONTROL_PLANE_GROUP}/{CAPI_VERSION}",
            "kind": "KubeadmControlPlane",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"version": version},
        }
        return _Step(
            KubeadmControlPlane, name, patch, f"KubeadmControlPlane {namespace}/{name}", ("f:spec", "f:version")
        )

    def _machine_step(self, name: str, version: str) -> _Step:
        namespace = self._settings.namespace
        patch = {
            "apiVersion": f"{CAPI_GROUP}/{CAPI_VERSION}",
            "kind": "MachineDeployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"template": {"spec": {"version": version}}},
        }
        what = f"MachineDeployment {namespace}/{name}"
        return _Step(MachineDeployment, name, patch, what, ("f:spec", "f:template", "f:spec", "f:version"))

    async def _watched_only(self, target: UpgradeTarget, spec: Mapping[str, Any]) -> list[_Step]:
        """With a topology, Cluster API moves the control plane and workers itself: they are
        only waited for (a patch of {} changes nothing)."""
        namespace = self._settings.namespace
        if target.track is Track.CONTROL_PLANE:
            ref = spec.get("controlPlaneRef") or {}
            if not ref.get("name"):
                raise PermanentError(f"Cluster {namespace}/{target.cluster} has no spec.controlPlaneRef yet")
            name = str(ref["name"])
            return [_Step(KubeadmControlPlane, name, {}, f"KubeadmControlPlane {namespace}/{name}")]
        names = await self._machine_deployments(target.cluster)
        return [_Step(MachineDeployment, n, {}, f"MachineDeployment {namespace}/{n}") for n in names]

    async def _machine_deployments(self, cluster: str) -> list[str]:
        namespace = self._settings.namespace
        try:
            listing = self._kube().list(MachineDeployment, namespace=namespace, labels={CLUSTER_NAME_LABEL: cluster})
            names = sorted([str((_dict(md).get("metadata") or {}).get("name")) async for md in listing])
        except Exception as exc:
            raise translate(exc, doing=f"listing the MachineDeployments of {namespace}/{cluster}") from exc
        if not names:
            raise PermanentError(
                f"Cluster {namespace}/{cluster} has no MachineDeployment (label {CLUSTER_NAME_LABEL}={cluster})"
            )
        return names

    async def _missing(self, step: _Step, version: str) -> str | None:
        """What keeps `step` from being done, None when it is."""
        obj = await self._get(step.resource, step.name, step.what)
        if step.resource is CapiCluster:
            current = ((obj.get("spec") or {}).get("topology") or {}).get("version")
            return None if current == version else f"spec.topology.version is {current!r}"
        if step.resource is KubeadmControlPlane:
            return control_plane_ready(obj, version)
        return machines_ready(obj, version)

    async def _apply(self, step: _Step) -> None:
        if not step.patch:
            return
        obj = step.resource.from_dict(dict(step.patch))
        doing = f"setting the version of {step.what}"
        try:
            await self._kube().apply(obj, field_manager=FIELD_MANAGER, force=False)
            return
        except Exception as exc:
            error = translate(exc, doing=doing)
            if not isinstance(error, KubeConflictError):
                raise error from exc
        owners = applying_owners(await self._get(step.resource, step.name, step.what), step.field)
        if owners:
            raise KubeConflictError(
                f"{doing}: the version is declared by field manager(s) {', '.join(sorted(owners))} through "
                "server-side apply, which would set it back; change it there, or remove it from that manager"
            )
        try:
            await self._kube().apply(obj, field_manager=FIELD_MANAGER, force=True)
        except Exception as exc:
            raise translate(exc, doing=doing) from exc

    async def _wait(self, steps: list[_Step], version: str, progress: list[str]) -> None:
        """Poll until every step is done; the caller's timeout ends it otherwise. A read that
        fails for a moment (the API server restarting) is tried again on the next round."""
        while True:
            left = []
            for step in steps:
                try:
                    why = await self._missing(step, version)
                except PermanentError:
                    raise
                except RolloutError as exc:
                    why = f"not read: {exc}"
                if why is not None:
                    left.append(f"{step.what}: {why}")
            progress[:] = left
            if not left:
                return
            await asyncio.sleep(self._settings.poll_interval_s)
