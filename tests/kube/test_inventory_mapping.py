"""How a cluster object maps to an inventory cluster (pure; the watcher tests cover the wire)."""

from __future__ import annotations

from rollout_common.fleet import Cluster
from rollout_common.selector import LabelSelector
from rollout_health.inventory.mapping import ClusterSource, GroupSource, Unmapped, control_plane_version, to_cluster


def capi(labels: dict[str, str], annotations: dict[str, str] | None = None, version: str | None = "v1.30.2") -> object:
    spec = {"topology": {"class": "standard", "version": version}} if version else {}
    meta = {"name": "eu-1", "namespace": "fleet", "labels": labels, "annotations": annotations or {}}
    return {"metadata": meta, "spec": spec}


def source(
    labels: dict[str, str], annotations: dict[str, str] | None = None, version: str | None = "v1.30.2"
) -> ClusterSource:
    return ClusterSource.from_object(capi(labels, annotations, version))  # type: ignore[arg-type]


def test_topology_version_labels_channel_and_node_version() -> None:
    annotations = {
        "rollout/channel": "rapid",
        "rollout/node-version": "v1.29.8",
        "rollout/deprecated-api-usage": "true",
    }
    cluster = to_cluster(source({"env": "prod"}, annotations))
    assert cluster == Cluster(
        name="eu-1", labels={"env": "prod"}, version="1.30.2", nodeVersion="1.29.8", channel="rapid",
        deprecatedApiUsage=True,
    )  # fmt: skip


def test_channel_from_a_label_and_version_from_the_annotation_without_topology() -> None:
    cluster = to_cluster(source({"rollout/channel": "stable"}, {"rollout/version": "1.28.3"}, version=None))
    assert isinstance(cluster, Cluster) and (cluster.version, cluster.channel) == ("1.28.3", "stable")


def test_no_version_or_a_bad_one_is_left_out_with_the_reason() -> None:
    assert to_cluster(source({}, version=None)) == Unmapped(
        "eu-1", "no spec.topology.version, no version on a KubeadmControlPlane and no rollout/version annotation"
    )
    bad = to_cluster(source({}, version="v1.30"))
    assert isinstance(bad, Unmapped) and "is not a version" in bad.reason


def test_without_a_cluster_class_the_version_is_what_the_kubeadm_control_plane_runs() -> None:
    ref = {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta1", "kind": "KubeadmControlPlane", "name": "eu-1-cp"}
    obj = {"metadata": {"name": "eu-1", "namespace": "fleet"}, "spec": {"controlPlaneRef": ref}}
    cluster_source = ClusterSource.from_object(obj)
    assert cluster_source.control_plane == ("fleet", "eu-1-cp")
    upgrading = {"spec": {"version": "v1.31.0"}, "status": {"version": "v1.30.2"}}
    # status.version (running), not spec.version (desired); spec.version only before any status
    planes = {("fleet", "eu-1-cp"): control_plane_version(upgrading)}
    assert planes == {("fleet", "eu-1-cp"): "v1.30.2"}
    assert control_plane_version({"spec": {"version": "v1.31.0"}}) == "v1.31.0"
    with_annotation = ClusterSource.from_object({**obj, "metadata": {**obj["metadata"],
                                                "annotations": {"rollout/version": "v1.29.8"}}})  # fmt: skip
    running = to_cluster(with_annotation, (), planes)
    assert isinstance(running, Cluster) and running.version == "1.30.2"  # the control plane wins
    fallback = to_cluster(with_annotation, (), {})  # its control plane not (yet) seen
    assert isinstance(fallback, Cluster) and fallback.version == "1.29.8"
    # another provider's control plane: the annotation says the version
    other = {**ref, "apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "AWSManagedControlPlane"}
    elsewhere = ClusterSource.from_object({"metadata": obj["metadata"], "spec": {"controlPlaneRef": other}})
    assert elsewhere.control_plane is None


def test_group_is_the_first_matching_cluster_group_of_the_namespace_seq_5() -> None:
    selector = LabelSelector.model_validate({"matchLabels": {"region": "eu"}})
    groups = [
        GroupSource(name="zz-eu", namespace="fleet", labels={"tier": "silver"}, selector=selector),
        GroupSource(name="emea", namespace="fleet", labels={"tier": "gold"}, selector=selector),
        GroupSource(name="elsewhere", namespace="other", labels={"tier": "x"}, selector=selector),
        GroupSource(name="empty", namespace="fleet", labels={}, selector=None),  # selects nothing
    ]
    cluster = to_cluster(source({"region": "eu"}), groups)
    assert isinstance(cluster, Cluster) and (cluster.group, dict(cluster.group_labels)) == ("emea", {"tier": "gold"})
    named = to_cluster(source({"region": "eu"}, {"rollout/group": "zz-eu"}), groups)
    assert isinstance(named, Cluster) and (named.group, dict(named.group_labels)) == ("zz-eu", {"tier": "silver"})
    alone = to_cluster(source({"region": "us"}), groups)
    assert isinstance(alone, Cluster) and (alone.group, dict(alone.group_labels)) == (None, {})
