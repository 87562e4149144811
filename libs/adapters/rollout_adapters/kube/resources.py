"""The custom resources rollout reads and patches, as lightkube generic resources.

Cluster API `v1beta1` (the storage version of Cluster API 1.10) and Fleet `v1alpha1`.
"""

from __future__ import annotations

from typing import Final

from lightkube.generic_resource import GenericNamespacedResource, create_namespaced_resource

CAPI_GROUP: Final = "cluster.x-k8s.io"
CAPI_VERSION: Final = "v1beta1"
CONTROL_PLANE_GROUP: Final = "controlplane.cluster.x-k8s.io"
FLEET_GROUP: Final = "fleet.cattle.io"
FLEET_VERSION: Final = "v1alpha1"
# The label Cluster API puts on every object that belongs to a cluster.
CLUSTER_NAME_LABEL: Final = "cluster.x-k8s.io/cluster-name"

CapiCluster: type[GenericNamespacedResource] = create_namespaced_resource(
    CAPI_GROUP, CAPI_VERSION, "Cluster", "clusters"
)
MachineDeployment: type[GenericNamespacedResource] = create_namespaced_resource(
    CAPI_GROUP, CAPI_VERSION, "MachineDeployment", "machinedeployments"
)
KubeadmControlPlane: type[GenericNamespacedResource] = create_namespaced_resource(
    CONTROL_PLANE_GROUP, CAPI_VERSION, "KubeadmControlPlane", "kubeadmcontrolplanes"
)
FleetCluster: type[GenericNamespacedResource] = create_namespaced_resource(
    FLEET_GROUP, FLEET_VERSION, "Cluster", "clusters"
)
FleetClusterGroup: type[GenericNamespacedResource] = create_namespaced_resource(
    FLEET_GROUP, FLEET_VERSION, "ClusterGroup", "clustergroups"
)
