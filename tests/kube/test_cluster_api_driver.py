"""The Cluster API driver against a real kube-apiserver, with the tests' simulated provider moving
`status` (capi_world): what it patches, under which field manager, how long it waits, and the
reasons it gives when it cannot upgrade."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from capi_world import SimulatedProvider, control_plane, create_cluster
from lightkube import AsyncClient
from lightkube.types import PatchType
from rbac import kubeconfig_with_rules

from rollout_adapters.kube.client import async_client
from rollout_adapters.kube.resources import CapiCluster, KubeadmControlPlane, MachineDeployment
from rollout_common.status import Track
from rollout_executor.drivers.cluster_api import FIELD_MANAGER, ClusterApiDriver
from rollout_executor.drivers.port import DriverOutcome
from rollout_executor.settings import ClusterApiDriverSettings
from rollout_executor.target import UpgradeTarget

pytestmark = pytest.mark.asyncio(loop_scope="session")

DELAY_S = 1.0


async def upgrade(
    kubeconfig: Path, namespace: str, cluster: str, track: Track, version: str, **settings: Any
) -> DriverOutcome:
    options = {"namespace": namespace, "poll_interval_s": 0.2, "timeout_s": 20.0, **settings}
    client = async_client(kubeconfig=kubeconfig, field_manager=FIELD_MANAGER)
    driver = ClusterApiDriver(ClusterApiDriverSettings(kubeconfig=kubeconfig, **options), client=client)
    try:
        return await driver.upgrade(UpgradeTarget(cluster, track, version), fencing_token=1)
    finally:
        await driver.close()


async def observed(kubeconfig: Path, namespace: str, cluster: str, track: Track, version: str) -> str | None:
    settings = ClusterApiDriverSettings(kubeconfig=kubeconfig, namespace=namespace, timeout_s=10.0)
    driver = ClusterApiDriver(settings, client=async_client(kubeconfig=kubeconfig, field_manager=FIELD_MANAGER))
    try:
        return await driver.observed_version(UpgradeTarget(cluster, track, version))
    finally:
        await driver.close()


def managers(obj: Any) -> set[str]:
    return {entry["manager"] for entry in obj.to_dict()["metadata"].get("managedFields") or []}


async def test_control_plane_then_nodes_are_patched_and_waited_for(
    kube: AsyncClient, kubeconfig: Path, namespace: str
) -> None:
    await create_cluster(kube, "eu-1", namespace, version="v1.30.2", pools=("a", "b"))
    async with SimulatedProvider(kube, namespace, delay_s=DELAY_S).running():
        started = time.monotonic()
        outcome = await upgrade(kubeconfig, namespace, "eu-1", Track.CONTROL_PLANE, "1.31.0")
        assert outcome == DriverOutcome(succeeded=True)
        assert time.monotonic() - started >= DELAY_S  # it waited for the status, not just the patch
        cp = await kube.get(KubeadmControlPlane, "eu-1-cp", namespace=namespace)
        assert (cp.spec["version"], cp.status["version"]) == ("v1.31.0", "v1.31.0")
        assert FIELD_MANAGER in managers(cp)
        # Nodes untouched by the control-plane track.
        md = await kube.get(MachineDeployment, "eu-1-a", namespace=namespace)
        assert md.spec["template"]["spec"]["version"] == "v1.30.2"
        outcome = await upgrade(kubeconfig, namespace, "eu-1", Track.NODES, "1.31.0")
        assert outcome == DriverOutcome(succeeded=True)
    for pool in ("a", "b"):
        md = await kube.get(MachineDeployment, f"eu-1-{pool}", namespace=namespace)
        assert md.spec["template"]["spec"]["version"] == "v1.31.0"
        assert md.status["updatedReplicas"] == md.spec["replicas"] == 2


async def test_already_on_the_version_succeeds_at_once_without_a_patch(
    kube: AsyncClient, kubeconfig: Path, namespace: str
) -> None:
    await create_cluster(kube, "eu-1", namespace, version="v1.30.2")
    before = await kube.get(KubeadmControlPlane, "eu-1-cp", namespace=namespace)
    # No simulated provider runs: waiting would time out, so success means nothing was waited for.
    assert await upgrade(kubeconfig, namespace, "eu-1", Track.CONTROL_PLANE, "1.30.2", timeout_s=3) == DriverOutcome(
        succeeded=True
    )
    after = await kube.get(KubeadmControlPlane, "eu-1-cp", namespace=namespace)
    assert after.metadata.resourceVersion == before.metadata.resourceVersion
    assert FIELD_MANAGER not in managers(after)


async def test_the_probe_before_a_rerun_says_the_target_only_when_every_object_runs_it_and_is_ready(
    kube: AsyncClient, kubeconfig: Path, namespace: str
) -> None:
    """BUS-3: a new lease holder asks before it upgrades again. The driver answers the target version
    only for a track already there on every object (what `upgrade` would find done), else None."""
    await create_cluster(kube, "eu-1", namespace, version="v1.30.2", pools=("a", "b"))
    assert await observed(kubeconfig, namespace, "eu-1", Track.CONTROL_PLANE, "1.30.2") == "1.30.2"
    assert await observed(kubeconfig, namespace, "eu-1", Track.NODES, "1.30.2") == "1.30.2"
    assert await observed(kubeconfig, namespace, "eu-1", Track.CONTROL_PLANE, "1.31.0") is None
    async with SimulatedProvider(kube, namespace, delay_s=0.2).running():
        assert await upgrade(kubeconfig, namespace, "eu-1", Track.NODES, "1.31.0") == DriverOutcome(True)
    # Both node pools moved; the control plane did not.
    assert await observed(kubeconfig, namespace, "eu-1", Track.NODES, "1.31.0") == "1.31.0"
    assert await observed(kubeconfig, namespace, "eu-1", Track.CONTROL_PLANE, "1.31.0") is None
    # A pool asked for the version but not there yet (its status lags) is not called done.
    await kube.patch(
        MachineDeployment,
        "eu-1-b",
        {"spec": {"template": {"spec": {"version": "v1.32.0"}}}},
        namespace=namespace,
        patch_type=PatchType.MERGE,
    )
    assert await observed(kubeconfig, namespace, "eu-1", Track.NODES, "1.32.0") is None
    assert await observed(kubeconfig, namespace, "no-such-cluster", Track.NODES, "1.31.0") is None


async def test_topology_cluster_gets_its_topology_version(kube: AsyncClient, kubeconfig: Path, namespace: str) -> None:
    await create_cluster(kube, "eu-1", namespace, version="v1.30.2", topology=True)
    async with SimulatedProvider(kube, namespace, delay_s=0.3).running():
        assert await upgrade(kubeconfig, namespace, "eu-1", Track.CONTROL_PLANE, "1.31.0") == DriverOutcome(True)
        assert await upgrade(kubeconfig, namespace, "eu-1", Track.NODES, "1.31.0") == DriverOutcome(True)
    cluster = await kube.get(CapiCluster, "eu-1", namespace=namespace)
    assert cluster.spec["topology"]["version"] == "v1.31.0"
    assert FIELD_MANAGER in managers(cluster)
    cp = await kube.get(KubeadmControlPlane, "eu-1-cp", namespace=namespace)
    assert FIELD_MANAGER not in managers(cp)  # Cluster API's topology controller moved it
    md = await kube.get(MachineDeployment, "eu-1-workers", namespace=namespace)
    assert md.spec["template"]["spec"]["version"] == "v1.31.0"


async def test_times_out_with_what_the_status_still_lacks(kube: AsyncClient, kubeconfig: Path, namespace: str) -> None:
    await create_cluster(kube, "eu-1", namespace, version="v1.30.2")
    outcome = await upgrade(kubeconfig, namespace, "eu-1", Track.CONTROL_PLANE, "1.31.0", timeout_s=1.5)
    assert outcome == DriverOutcome(
        succeeded=False,
        error=f"timed out after 2 s waiting for eu-1 controlPlane to run v1.31.0: "
        f"KubeadmControlPlane {namespace}/eu-1-cp: status.version is 'v1.30.2'",
    )


async def test_missing_objects_are_named(kube: AsyncClient, kubeconfig: Path, namespace: str) -> None:
    outcome = await upgrade(kubeconfig, namespace, "nowhere", Track.CONTROL_PLANE, "1.31.0")
    assert not outcome.succeeded
    assert outcome.error == (
        f'reading Cluster {namespace}/nowhere: not found: clusters.cluster.x-k8s.io "nowhere" not found'
    )
    await create_cluster(kube, "eu-1", namespace, version="v1.30.2", pools=())
    outcome = await upgrade(kubeconfig, namespace, "eu-1", Track.NODES, "1.31.0")
    assert outcome == DriverOutcome(
        succeeded=False,
        error=f"Cluster {namespace}/eu-1 has no MachineDeployment (label cluster.x-k8s.io/cluster-name=eu-1)",
    )


async def test_a_version_declared_by_another_applier_is_a_conflict(
    kube: AsyncClient, kubeconfig: Path, namespace: str
) -> None:
    await create_cluster(kube, "eu-1", namespace, version="v1.30.2")
    # A GitOps tool declares the version through server-side apply: it would set it back.
    declared = control_plane("eu-1", namespace, version="v1.30.2")
    await kube.apply(declared, field_manager="gitops", force=True)
    outcome = await upgrade(kubeconfig, namespace, "eu-1", Track.CONTROL_PLANE, "1.31.0")
    assert outcome == DriverOutcome(
        succeeded=False,
        error=f"setting the version of KubeadmControlPlane {namespace}/eu-1-cp: the version is declared by field "
        "manager(s) gitops through server-side apply, which would set it back; change it there, or remove it "
        "from that manager",
    )
    cp = await kube.get(KubeadmControlPlane, "eu-1-cp", namespace=namespace)
    assert cp.spec["version"] == "v1.30.2"
    # Once an update (as clusterctl or kubectl edit make) has changed the version, the applier no
    # longer owns it, and the driver takes the field over.
    await kube.patch(KubeadmControlPlane, "eu-1-cp", {"spec": {"version": "v1.30.3"}}, namespace=namespace,
                     patch_type=PatchType.MERGE, field_manager="clusterctl")  # fmt: skip
    async with SimulatedProvider(kube, namespace, delay_s=0.2).running():
        assert await upgrade(kubeconfig, namespace, "eu-1", Track.CONTROL_PLANE, "1.31.0") == DriverOutcome(True)


async def test_an_rbac_denial_says_which_permission_is_missing(
    kube: AsyncClient, kubeconfig: Path, namespace: str, tmp_path: Path
) -> None:
    await create_cluster(kube, "eu-1", namespace, version="v1.30.2")
    read_only = [
        {"apiGroups": ["cluster.x-k8s.io"], "resources": ["clusters", "machinedeployments"], "verbs": ["get", "list"]},
        {"apiGroups": ["controlplane.cluster.x-k8s.io"], "resources": ["kubeadmcontrolplanes"], "verbs": ["get"]},
    ]
    limited = await kubeconfig_with_rules(
        kube, admin_kubeconfig=kubeconfig, namespace=namespace, name="executor", rules=read_only, folder=tmp_path
    )
    outcome = await upgrade(limited, namespace, "eu-1", Track.CONTROL_PLANE, "1.31.0")
    assert outcome == DriverOutcome(
        succeeded=False,
        error=f"setting the version of KubeadmControlPlane {namespace}/eu-1-cp: access denied (403): "
        f'kubeadmcontrolplanes.controlplane.cluster.x-k8s.io "eu-1-cp" is forbidden: User '
        f'"system:serviceaccount:{namespace}:executor" cannot patch resource "kubeadmcontrolplanes" in API group '
        f'"controlplane.cluster.x-k8s.io" in the namespace "{namespace}"',
    )
