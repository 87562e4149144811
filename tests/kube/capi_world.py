"""The tests' simulated world of Cluster API: objects as a provider would create them, and a
stand-in for the controllers and infrastructure provider that, a little after a version is set,
writes the `status` a finished rollout of that version would show. Nothing here is rollout's
code; it only plays the part of what a real management cluster runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from lightkube import AsyncClient
from lightkube.types import PatchType

from rollout_adapters.kube.resources import CLUSTER_NAME_LABEL, CapiCluster, KubeadmControlPlane, MachineDeployment

CAPI = "cluster.x-k8s.io/v1beta1"
CONTROL_PLANE = "controlplane.cluster.x-k8s.io/v1beta1"
INFRA = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "DockerMachineTemplate", "name": "t"}


def cluster(name: str, namespace: str, *, labels: Mapping[str, str], topology_version: str | None = None) -> Any:
    spec: dict[str, Any] = {
        "controlPlaneRef": {"apiVersion": CONTROL_PLANE, "kind": "KubeadmControlPlane", "name": f"{name}-cp"}
    }
    if topology_version:
        spec["topology"] = {"class": "standard", "version": topology_version}
    meta = {"name": name, "namespace": namespace, "labels": dict(labels)}
    return CapiCluster(apiVersion=CAPI, kind="Cluster", metadata=meta, spec=spec)


def control_plane(cluster_name: str, namespace: str, *, version: str, replicas: int = 3) -> Any:
    meta = {"name": f"{cluster_name}-cp", "namespace": namespace, "labels": {CLUSTER_NAME_LABEL: cluster_name}}
    spec = {
        "version": version,
        "replicas": replicas,
        "kubeadmConfigSpec": {},
        "machineTemplate": {"infrastructureRef": INFRA},
    }
    return KubeadmControlPlane(apiVersion=CONTROL_PLANE, kind="KubeadmControlPlane", metadata=meta, spec=spec)


def machine_deployment(cluster_name: str, namespace: str, pool: str, *, version: str, replicas: int = 2) -> Any:
    name = f"{cluster_name}-{pool}"
    meta = {"name": name, "namespace": namespace, "labels": {CLUSTER_NAME_LABEL: cluster_name}}
    spec = {
        "clusterName": cluster_name,
        "replicas": replicas,
        "selector": {"matchLabels": {"pool": name}},
        "template": {
            "metadata": {"labels": {"pool": name}},
            "spec": {
                "clusterName": cluster_name,
                "version": version,
                "bootstrap": {"dataSecretName": f"{name}-bootstrap"},
                "infrastructureRef": INFRA,
            },
        },
    }
    return MachineDeployment(apiVersion=CAPI, kind="MachineDeployment", metadata=meta, spec=spec)


def ready_control_plane_status(obj: Mapping[str, Any]) -> dict[str, Any]:
    spec, meta = obj["spec"], obj["metadata"]
    replicas = int(spec.get("replicas") or 1)
    return {
        "version": spec["version"],
        "replicas": replicas,
        "updatedReplicas": replicas,
        "readyReplicas": replicas,
        "unavailableReplicas": 0,
        "ready": True,
        "initialized": True,
        "observedGeneration": meta.get("generation", 1),
    }


def ready_machines_status(obj: Mapping[str, Any]) -> dict[str, Any]:
    spec, meta = obj["spec"], obj["metadata"]
    replicas = int(spec.get("replicas") or 0)
    return {
        "replicas": replicas,
        "updatedReplicas": replicas,
        "readyReplicas": replicas,
        "availableReplicas": replicas,
        "unavailableReplicas": 0,
        "phase": "Running",
        "observedGeneration": meta.get("generation", 1),
    }


async def create_cluster(
    kube: AsyncClient,
    name: str,
    namespace: str,
    *,
    version: str,
    labels: Mapping[str, str] | None = None,
    pools: tuple[str, ...] = ("workers",),
    topology: bool = False,
) -> None:
    """A cluster, its control plane and node pools, all running `version` and ready."""
    await kube.create(cluster(name, namespace, labels=labels or {}, topology_version=version if topology else None))
    cp = await kube.create(control_plane(name, namespace, version=version))
    await _set_status(kube, KubeadmControlPlane, cp.to_dict(), ready_control_plane_status)
    for pool in pools:
        md = await kube.create(machine_deployment(name, namespace, pool, version=version))
        await _set_status(kube, MachineDeployment, md.to_dict(), ready_machines_status)


async def _set_status(kube: AsyncClient, resource: Any, obj: Mapping[str, Any], status: Any) -> None:
    meta = obj["metadata"]
    await kube.patch(resource.Status, meta["name"], {"status": status(obj)}, namespace=meta["namespace"],
                     patch_type=PatchType.MERGE)  # fmt: skip


class SimulatedProvider:
    """Plays Cluster API's controllers in `namespace`: the topology controller (a Cluster's
    topology version goes to its control plane, then, once that runs it, to its
    MachineDeployments) and the rollout itself (`delay_s` after a version is set, the status
    says every replica runs it and is ready)."""

    def __init__(self, kube: AsyncClient, namespace: str, *, delay_s: float = 1.0, interval_s: float = 0.2) -> None:
        self.kube = kube
        self.namespace = namespace
        self.delay_s = delay_s
        self.interval_s = interval_s
        self._seen: dict[tuple[str, str, int], float] = {}

    async def step(self) -> None:
        now = time.monotonic()
        ns = self.namespace
        async for c in self.kube.list(CapiCluster, namespace=ns):
            obj = c.to_dict()
            topology = (obj.get("spec") or {}).get("topology")
            if topology:
                await self._follow_topology(obj["metadata"]["name"], topology["version"])
        async for cp in self.kube.list(KubeadmControlPlane, namespace=ns):
            obj = cp.to_dict()
            if (obj.get("status") or {}).get("version") != obj["spec"]["version"] and self._due(obj, now):
                await _set_status(self.kube, KubeadmControlPlane, obj, ready_control_plane_status)
        async for md in self.kube.list(MachineDeployment, namespace=ns):
            obj = md.to_dict()
            observed = (obj.get("status") or {}).get("observedGeneration")
            if observed != obj["metadata"]["generation"] and self._due(obj, now):
                await _set_status(self.kube, MachineDeployment, obj, ready_machines_status)

    def _due(self, obj: Mapping[str, Any], now: float) -> bool:
        meta = obj["metadata"]
        key = (obj["kind"], meta["name"], int(meta["generation"]))
        return now - self._seen.setdefault(key, now) >= self.delay_s

    async def _follow_topology(self, cluster_name: str, version: str) -> None:
        ns = self.namespace
        cp = (await self.kube.get(KubeadmControlPlane, f"{cluster_name}-cp", namespace=ns)).to_dict()
        if cp["spec"]["version"] != version:
            await self.kube.patch(KubeadmControlPlane, f"{cluster_name}-cp", {"spec": {"version": version}},
                                  namespace=ns, patch_type=PatchType.MERGE)  # fmt: skip
            return
        if (cp.get("status") or {}).get("version") != version:
            return  # workers follow once the control plane runs the version
        async for md in self.kube.list(MachineDeployment, namespace=ns, labels={CLUSTER_NAME_LABEL: cluster_name}):
            obj = md.to_dict()
            if obj["spec"]["template"]["spec"].get("version") != version:
                await self.kube.patch(MachineDeployment, obj["metadata"]["name"],
                                      {"spec": {"template": {"spec": {"version": version}}}},
                                      namespace=ns, patch_type=PatchType.MERGE)  # fmt: skip

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[SimulatedProvider]:
        async def loop() -> None:
            while True:
                await self.step()
                await asyncio.sleep(self.interval_s)

        task = asyncio.create_task(loop())
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
