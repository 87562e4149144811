"""Each process works with exactly the role deploy/k8s/management gives it, and is refused beyond
it: the rules of each ClusterRole, bound in the test's namespace to a service account of its own."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import pytest
import yaml
from capi_world import SimulatedProvider, create_cluster
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Secret
from lightkube.types import PatchType
from rbac import kubeconfig_with_rules
from test_inventory_watcher import read_until, watching

from rollout_adapters.kube.resources import CapiCluster, KubeadmControlPlane
from rollout_common.status import Track
from rollout_executor.drivers.cluster_api import ClusterApiDriver
from rollout_executor.drivers.port import DriverOutcome
from rollout_executor.settings import ClusterApiDriverSettings
from rollout_executor.target import UpgradeTarget
from rollout_health.probes.kubernetes import KubernetesProbe
from rollout_health.settings import KubernetesProbeSettings

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.integration]

MANAGEMENT = Path(__file__).resolve().parents[2] / "deploy" / "k8s" / "management"


def role_rules(name: str) -> list[dict[str, Any]]:
    for path in (MANAGEMENT / "rbac.yaml", MANAGEMENT / "probe-secrets.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc["kind"] == "ClusterRole" and doc["metadata"]["name"] == name:
                return list(doc["rules"])
    raise AssertionError(f"no ClusterRole {name} in {MANAGEMENT}")


async def own_kubeconfig(
    kube: AsyncClient, admin: Path, namespace: str, name: str, rules: list[dict[str, Any]], folder: Path
) -> Path:
    return await kubeconfig_with_rules(
        kube, admin_kubeconfig=admin, namespace=namespace, name=name, rules=rules, folder=folder
    )


async def refused(client: AsyncClient, call: Any) -> int:
    try:
        await call(client)
    except ApiError as exc:
        return int(exc.status.code or 0)
    return 200


def client_for(path: Path) -> AsyncClient:
    return AsyncClient(KubeConfig.from_file(str(path)), field_manager="least-privilege-test")


async def test_inventory_watcher_reads_and_writes_nothing(
    kube: AsyncClient, kubeconfig: Path, kafka_bootstrap: str, topic_prefix: str, namespace: str, tmp_path: Path
) -> None:
    own = await own_kubeconfig(
        kube, kubeconfig, namespace, "watcher", role_rules("rollout-inventory-watcher"), tmp_path
    )
    await create_cluster(kube, "eu-1", namespace, version="v1.30.2", topology=True, labels={"env": "prod"})
    # no ClusterClass: its version is read from its KubeadmControlPlane
    await create_cluster(kube, "eu-2", namespace, version="v1.29.8", labels={"env": "prod"})
    async with watching(own, kafka_bootstrap, topic_prefix, namespace, watch_groups=True):
        seen = await read_until(kafka_bootstrap, topic_prefix, lambda c: len(c) >= 2)
    assert seen == [("upsert", "eu-1", "1.30.2", {"env": "prod"}), ("upsert", "eu-2", "1.29.8", {"env": "prod"})]
    client = client_for(own)
    try:
        patch = {"metadata": {"labels": {"env": "canary"}}}
        assert await refused(client, lambda c: c.patch(CapiCluster, "eu-1", patch, namespace=namespace,
                                                       patch_type=PatchType.MERGE)) == 403  # fmt: skip
        version = {"spec": {"version": "v1.30.2"}}
        assert await refused(client, lambda c: c.patch(KubeadmControlPlane, "eu-2-cp", version, namespace=namespace,
                                                       patch_type=PatchType.MERGE)) == 403  # fmt: skip
        assert await refused(client, lambda c: c.get(Secret, "eu-1-kubeconfig", namespace=namespace)) == 403
    finally:
        await client.close()


async def test_executor_patches_versions_and_reads_no_secret(
    kube: AsyncClient, kubeconfig: Path, namespace: str, tmp_path: Path
) -> None:
    own = await own_kubeconfig(kube, kubeconfig, namespace, "executor", role_rules("rollout-executor"), tmp_path)
    await create_cluster(kube, "eu-1", namespace, version="v1.30.2")
    settings = ClusterApiDriverSettings(kubeconfig=own, namespace=namespace, poll_interval_s=0.2, timeout_s=20)
    driver = ClusterApiDriver(settings)
    try:
        async with SimulatedProvider(kube, namespace, delay_s=0.2).running():
            for track in (Track.CONTROL_PLANE, Track.NODES):
                outcome = await driver.upgrade(UpgradeTarget("eu-1", track, "1.31.0"), fencing_token=1)
                assert outcome == DriverOutcome(succeeded=True)
    finally:
        await driver.close()
    client = client_for(own)
    try:
        assert await refused(client, lambda c: c.get(Secret, "eu-1-kubeconfig", namespace=namespace)) == 403
        assert await refused(client, lambda c: c.delete(CapiCluster, "eu-1", namespace=namespace)) == 403
    finally:
        await client.close()


async def test_probe_reads_its_kubeconfig_secret_and_no_other(
    kube: AsyncClient, kubeconfig: Path, workload_kubeconfig: Path, namespace: str, tmp_path: Path
) -> None:
    rules = role_rules("rollout-health-probe")
    assert rules[0]["resourceNames"]  # never empty: an empty list would grant every Secret
    rules[0]["resourceNames"] = ["eu-1-kubeconfig"]
    own = await own_kubeconfig(kube, kubeconfig, namespace, "probe", rules, tmp_path)
    data = {"value": await asyncio.to_thread(lambda: base64.b64encode(workload_kubeconfig.read_bytes()).decode())}
    for name in ("eu-1-kubeconfig", "eu-2-kubeconfig"):
        await kube.create(Secret(metadata=ObjectMeta(name=name, namespace=namespace), data=data))
    probe = KubernetesProbe(KubernetesProbeSettings(kubeconfig=own, namespace=namespace))
    await probe.start()
    try:
        first = await probe.check("eu-1")
        second = await probe.check("eu-2")
    finally:
        await probe.close()
    # eu-1's Secret is read (the workload cluster answers; without nodes it is not ready yet).
    assert first.control_plane_version == "v1.34.2"
    assert second.ready is False and second.detail is not None
    assert second.detail.startswith(f"reading Secret {namespace}/eu-2-kubeconfig: access denied (403)")
    client = client_for(own)
    try:
        assert await refused(client, lambda c: c.get(CapiCluster, "eu-1", namespace=namespace)) == 403
    finally:
        await client.close()
