"""rollout's own custom resources as lightkube generic resources."""

from __future__ import annotations

from lightkube.generic_resource import GenericNamespacedResource, create_namespaced_resource

from rollout_adapters.kube_bridge.crds import GROUP, VERSION

UpgradeSequence: type[GenericNamespacedResource] = create_namespaced_resource(
    GROUP, VERSION, "UpgradeSequence", "upgradesequences"
)
UpgradeRelease: type[GenericNamespacedResource] = create_namespaced_resource(
    GROUP, VERSION, "UpgradeRelease", "upgradereleases"
)
UpgradeRollout: type[GenericNamespacedResource] = create_namespaced_resource(
    GROUP, VERSION, "UpgradeRollout", "upgraderollouts"
)
UpgradeApproval: type[GenericNamespacedResource] = create_namespaced_resource(
    GROUP, VERSION, "UpgradeApproval", "upgradeapprovals"
)
