"""The inventory watcher against a real kube-apiserver and a real broker (SEQ-6): Cluster API
`Cluster` objects created, relabelled, upgraded and deleted become exactly the inventory changes
a reader of rollout.inventory sees; a stale resourceVersion (410 Gone) lists again."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from capi_world import cluster, control_plane, create_cluster
from lightkube import AsyncClient
from lightkube.types import PatchType
from topic_reader import Message, read_topic

from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.kube.client import async_client
from rollout_adapters.kube.resources import CapiCluster, FleetClusterGroup, KubeadmControlPlane
from rollout_common.envelope import decode
from rollout_common.events import InventoryChange
from rollout_common.fleet import Cluster
from rollout_common.topics.catalog import INVENTORY
from rollout_health.inventory.checkpoint import Checkpoint, WatchState
from rollout_health.inventory.watcher import InventoryWatcher

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.integration]


def capi_cluster(
    name: str,
    namespace: str,
    *,
    labels: dict[str, str],
    version: str | None = None,
    annotations: dict[str, str] | None = None,
) -> Any:
    spec: dict[str, Any] = {"topology": {"class": "standard", "version": version}} if version else {}
    metadata = {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations or {}}
    return CapiCluster(apiVersion="cluster.x-k8s.io/v1beta1", kind="Cluster", metadata=metadata, spec=spec)


def changes(records: list[Message]) -> list[tuple[str, str, str | None, dict[str, str] | None]]:
    """(action, name, version, labels) of each inventory record, in order."""
    out = []
    for record in records:
        _, change = decode(record.value, dict(record.headers), INVENTORY.models)
        assert isinstance(change, InventoryChange)
        if change.cluster is not None:
            out.append((change.action, change.cluster.name, change.cluster.version, dict(change.cluster.labels)))
        else:
            out.append((change.action, change.name or "", None, None))
    return out


@contextlib.asynccontextmanager
async def watching(
    kubeconfig: Path, bootstrap: str, prefix: str, namespace: str, **options: Any
) -> AsyncIterator[InventoryWatcher]:
    bus = KafkaBus(bootstrap, client_id=f"{prefix}watcher")
    await bus.ensure_topics([INVENTORY.spec(prefix)])
    client = async_client(kubeconfig=kubeconfig, field_manager="rollout-inventory")
    watcher = InventoryWatcher(client=client, bus=bus, topic_prefix=prefix, namespace=namespace, retry_s=0.2, **options)
    stop = asyncio.Event()
    task = asyncio.create_task(watcher.run(stop))
    try:
        async with asyncio.timeout(30):
            await watcher.synced.wait()
        yield watcher
    finally:
        stop.set()
        await task
        await client.close()
        await bus.close()


async def read_until(
    bootstrap: str, prefix: str, done: Callable[[list[tuple[str, str, str | None, dict[str, str] | None]]], bool]
) -> list[tuple[str, str, str | None, dict[str, str] | None]]:
    records = await read_topic(bootstrap, prefix + INVENTORY.name, until=lambda rs: done(changes(rs)), timeout_s=30)
    return changes(records)


async def test_add_relabel_version_change_and_delete_are_published_seq_6(
    kube: AsyncClient, kubeconfig: Path, kafka_bootstrap: str, topic_prefix: str, namespace: str
) -> None:
    await kube.create(capi_cluster("eu-1", namespace, labels={"env": "canary"}, version="v1.30.2"))
    await kube.create(
        capi_cluster("eu-2", namespace, labels={"env": "prod"}, annotations={"rollout/version": "v1.29.8"})
    )
    await kube.create(capi_cluster("no-version", namespace, labels={"env": "prod"}))
    async with watching(kubeconfig, kafka_bootstrap, topic_prefix, namespace):
        seen = await read_until(kafka_bootstrap, topic_prefix, lambda c: len(c) >= 2)
        # Listed: the cluster with no version is left out (nothing to compare a target with).
        assert seen == [
            ("upsert", "eu-1", "1.30.2", {"env": "canary"}),
            ("upsert", "eu-2", "1.29.8", {"env": "prod"}),
        ]
        # A status-only change publishes nothing; a relabel, a version change and a deletion do.
        await kube.patch(CapiCluster.Status, "eu-1", {"status": {"phase": "Provisioned"}}, namespace=namespace,
                         patch_type=PatchType.MERGE)  # fmt: skip
        await kube.patch(CapiCluster, "eu-1", {"metadata": {"labels": {"env": "prod"}}}, namespace=namespace,
                         patch_type=PatchType.MERGE)  # fmt: skip
        await kube.patch(CapiCluster, "eu-2", {"metadata": {"annotations": {"rollout/version": "v1.30.2"}}},
                         namespace=namespace, patch_type=PatchType.MERGE)  # fmt: skip
        await kube.delete(CapiCluster, "eu-2", namespace=namespace)
        seen = await read_until(kafka_bootstrap, topic_prefix, lambda c: len(c) >= 5)
    assert seen == [
        ("upsert", "eu-1", "1.30.2", {"env": "canary"}),
        ("upsert", "eu-2", "1.29.8", {"env": "prod"}),
        ("upsert", "eu-1", "1.30.2", {"env": "prod"}),
        ("upsert", "eu-2", "1.30.2", {"env": "prod"}),
        ("remove", "eu-2", None, None),
    ]


async def test_a_cluster_without_a_cluster_class_runs_its_kubeadm_control_planes_version_seq_6(
    kube: AsyncClient, kubeconfig: Path, kafka_bootstrap: str, topic_prefix: str, namespace: str
) -> None:
    """The version of a Cluster not built from a ClusterClass is what its KubeadmControlPlane
    (`spec.controlPlaneRef`) runs: `status.version`. An upgrade set on `spec.version` publishes
    nothing until the status says the machines run it; a control plane the controller has not
    reported on yet stands in with `spec.version`; a control plane of another provider leaves the
    `rollout/version` annotation to say it."""
    await create_cluster(kube, "kcp-1", namespace, version="v1.30.2", labels={"env": "prod"})
    await kube.create(cluster("kcp-new", namespace, labels={"env": "prod"}))
    await kube.create(control_plane("kcp-new", namespace, version="v1.31.0"))  # no status yet
    other = capi_cluster("eks-1", namespace, labels={"env": "prod"}, annotations={"rollout/version": "v1.29.8"})
    other.spec = {"controlPlaneRef": {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2",
                                      "kind": "AWSManagedControlPlane", "name": "eks-1-cp"}}  # fmt: skip
    await kube.create(other)
    async with watching(kubeconfig, kafka_bootstrap, topic_prefix, namespace):
        seen = await read_until(kafka_bootstrap, topic_prefix, lambda c: len(c) >= 3)
        assert sorted(seen) == [
            ("upsert", "eks-1", "1.29.8", {"env": "prod"}),
            ("upsert", "kcp-1", "1.30.2", {"env": "prod"}),
            ("upsert", "kcp-new", "1.31.0", {"env": "prod"}),
        ]
        await kube.patch(KubeadmControlPlane, "kcp-1-cp", {"spec": {"version": "v1.31.0"}}, namespace=namespace,
                         patch_type=PatchType.MERGE)  # fmt: skip
        await kube.patch(KubeadmControlPlane.Status, "kcp-1-cp", {"status": {"version": "v1.31.0"}},
                         namespace=namespace, patch_type=PatchType.MERGE)  # fmt: skip
        await kube.delete(KubeadmControlPlane, "kcp-new-cp", namespace=namespace)
        seen = await read_until(kafka_bootstrap, topic_prefix, lambda c: len(c) >= 5)
    # the desired version alone published nothing; the running one did; a cluster whose control
    # plane is gone has no version any more, so it leaves the inventory
    assert seen[3:] == [("upsert", "kcp-1", "1.31.0", {"env": "prod"}), ("remove", "kcp-new", None, None)]


async def test_stale_resource_version_lists_again_and_removes_what_vanished_seq_6(
    kube: AsyncClient, kubeconfig: Path, kafka_bootstrap: str, topic_prefix: str, namespace: str, tmp_path: Path
) -> None:
    """A checkpoint from long ago: its resourceVersion is gone (410), so the watcher lists again,
    publishes the clusters there are now and removes the one it had published that is gone."""
    checkpoint = Checkpoint(tmp_path / "inventory.json")
    ghost = Cluster(name="gone-1", version="1.30.2", labels={"env": "prod"})
    stale = {"clusters": "1", "control_planes": "1"}
    checkpoint.save(WatchState(resource_versions=stale, published={"gone-1": ghost}))
    await kube.create(capi_cluster("eu-1", namespace, labels={"env": "canary"}, version="v1.30.2"))
    async with watching(kubeconfig, kafka_bootstrap, topic_prefix, namespace, checkpoint=checkpoint) as watcher:
        seen = await read_until(kafka_bootstrap, topic_prefix, lambda c: len(c) >= 2)
        assert watcher.relists == 2  # each stream: the Clusters and the KubeadmControlPlanes
    assert seen == [("upsert", "eu-1", "1.30.2", {"env": "canary"}), ("remove", "gone-1", None, None)]
    # What it saved resumes a later watcher without a list: it publishes nothing new.
    saved = checkpoint.load()
    assert set(saved.published) == {"eu-1"} and saved.resource_versions["clusters"] not in (None, "1")
    async with watching(kubeconfig, kafka_bootstrap, topic_prefix, namespace, checkpoint=checkpoint) as watcher:
        await kube.patch(CapiCluster, "eu-1", {"metadata": {"labels": {"env": "prod"}}}, namespace=namespace,
                         patch_type=PatchType.MERGE)  # fmt: skip
        seen = await read_until(kafka_bootstrap, topic_prefix, lambda c: len(c) >= 3)
        assert watcher.relists == 0
    assert seen[2:] == [("upsert", "eu-1", "1.30.2", {"env": "prod"})]


async def test_fleet_cluster_group_gives_group_and_group_labels_seq_5(
    kube: AsyncClient, kubeconfig: Path, kafka_bootstrap: str, topic_prefix: str, namespace: str
) -> None:
    """Fleet decides membership by the group's selector on the cluster's labels; the group's own
    labels are what clusterGroupSelector matches."""
    group = FleetClusterGroup(
        apiVersion="fleet.cattle.io/v1alpha1",
        kind="ClusterGroup",
        metadata={"name": "emea", "namespace": namespace, "labels": {"tier": "gold"}},
        spec={"selector": {"matchLabels": {"region": "eu"}}},
    )
    await kube.create(group)
    await kube.create(capi_cluster("eu-1", namespace, labels={"region": "eu"}, version="v1.30.2"))
    await kube.create(capi_cluster("us-1", namespace, labels={"region": "us"}, version="v1.30.2"))
    async with watching(kubeconfig, kafka_bootstrap, topic_prefix, namespace, watch_groups=True):
        records = await read_topic(kafka_bootstrap, topic_prefix + INVENTORY.name, until=lambda rs: len(rs) >= 2)
        groups = [(c.cluster.name, c.cluster.group, dict(c.cluster.group_labels)) for c in decoded(records)]
        assert groups == [("eu-1", "emea", {"tier": "gold"}), ("us-1", None, {})]
        # The group now selects the US too: us-1 moves into it, eu-1 is unchanged.
        await kube.patch(FleetClusterGroup, "emea", {"spec": {"selector": {"matchLabels": None,
                         "matchExpressions": [{"key": "region", "operator": "In", "values": ["eu", "us"]}]}}},
                         namespace=namespace, patch_type=PatchType.MERGE)  # fmt: skip
        records = await read_topic(kafka_bootstrap, topic_prefix + INVENTORY.name, until=lambda rs: len(rs) >= 3)
    groups = [(c.cluster.name, c.cluster.group, dict(c.cluster.group_labels)) for c in decoded(records)]
    assert groups[2:] == [("us-1", "emea", {"tier": "gold"})]


def decoded(records: list[Message]) -> list[Any]:
    out = []
    for record in records:
        _, change = decode(record.value, dict(record.headers), INVENTORY.models)
        assert isinstance(change, InventoryChange) and change.cluster is not None
        out.append(change)
    return out
