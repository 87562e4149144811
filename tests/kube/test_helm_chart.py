"""The Helm chart (deploy/helm/rollout): `helm lint`, `helm template` with its options, and `helm
install` on the real apiserver, whose bridge service account then runs the bridge with exactly the
chart's Role (no kubelet here: no pod runs, the test runs the bridge itself with that account)."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from bridge_harness import bridge_settings, eventually, kubeconfig_for_account, running
from helm_run import CHART, run_helm
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ServiceAccount
from lightkube.resources.rbac_authorization_v1 import Role
from lightkube.types import PatchType
from pydantic_settings import BaseSettings
from rollout_crd_install import installed_rollout_crds

from rollout_adapters.kube_bridge.resources import UpgradeRelease, UpgradeSequence
from rollout_adapters.kube_bridge.settings import BridgeSettings
from rollout_executor.settings import ExecutorSettings
from rollout_health.settings import InventorySettings, MonitorSettings
from rollout_planner.service.settings import PlannerSettings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "deploy"))
from deploy_model import accepted_env_names

ON_THE_APISERVER = pytest.mark.asyncio(loop_scope="session")
_HOLDERS = ("ConfigMap", "Secret")


def _kinds(rendered: str) -> list[tuple[str, str]]:
    return sorted((doc["kind"], doc["metadata"]["name"]) for doc in yaml.safe_load_all(rendered) if doc)


def test_helm_lint(helm: list[str]) -> None:
    assert "1 chart(s) linted, 0 chart(s) failed" in run_helm(helm, "lint", "--strict", str(CHART))


def test_helm_template_defaults(helm: list[str]) -> None:
    """Every service, the bridge with its Role, the management cluster's ClusterRoles; no KEDA."""
    assert _kinds(run_helm(helm, "template", "r1", str(CHART), "--namespace", "rollout")) == [
        ("ClusterRole", "r1-approver"),
        ("ClusterRole", "r1-executor"),
        ("ClusterRole", "r1-inventory"),
        ("ClusterRole", "r1-rollout-operator"),
        ("ClusterRoleBinding", "r1-executor"),
        ("ClusterRoleBinding", "r1-inventory"),
        ("ConfigMap", "r1-bridge"),
        ("ConfigMap", "r1-common"),
        ("ConfigMap", "r1-executor"),
        ("ConfigMap", "r1-health-monitor"),
        ("ConfigMap", "r1-inventory"),
        ("ConfigMap", "r1-planner"),
        ("Deployment", "r1-bridge"),
        ("Deployment", "r1-executor"),
        ("Deployment", "r1-health-monitor"),
        ("Deployment", "r1-inventory"),
        ("Deployment", "r1-planner"),
        ("Role", "r1-bridge"),
        ("RoleBinding", "r1-bridge"),
        ("Secret", "r1-redis"),
        ("Service", "r1-planner"),
        ("ServiceAccount", "r1-bridge"),
        ("ServiceAccount", "r1-executor"),
        ("ServiceAccount", "r1-inventory"),
    ]


def test_helm_template_options(helm: list[str]) -> None:
    """KEDA, PodMonitors, one namespace of Fleet clusters, an existing Redis Secret, no bridge."""
    rendered = run_helm(
        helm, "template", "r2", str(CHART), "--namespace", "rollout",
        "--set", "keda.enabled=true", "--set", "prometheus.podMonitor.enabled=true",
        "--set", "managementCluster.clusterKind=fleet", "--set", "managementCluster.namespace=fleet-default",
        "--set", "redis.existingSecret=my-redis", "--set", "bridge.enabled=false",
        "--set", "kafka.bootstrap=kafka:9093",
    )  # fmt: skip
    docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(rendered) if d}
    assert ("Secret", "r2-redis") not in docs and ("Deployment", "r2-bridge") not in docs
    scaled = docs[("ScaledObject", "r2-executor")]
    assert scaled["spec"]["triggers"][0]["metadata"]["bootstrapServers"] == "kafka:9093"
    assert "replicas" not in docs[("Deployment", "r2-executor")]["spec"]  # KEDA owns the count
    assert {name for kind, name in docs if kind == "PodMonitor"} == {"r2-planner", "r2-executor", "r2-health-monitor"}
    inventory = docs[("Role", "r2-inventory")]
    assert inventory["metadata"]["namespace"] == "fleet-default"
    assert inventory["rules"] == [
        {
            "apiGroups": ["fleet.cattle.io"],
            "resources": ["clusters", "clustergroups"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    planner = docs[("Deployment", "r2-planner")]["spec"]["template"]["spec"]["containers"][0]
    assert {"secretRef": {"name": "my-redis"}} in planner["envFrom"]
    assert docs[("ConfigMap", "r2-inventory")]["data"] == {
        "ROLLOUT_CLUSTER_KIND": "fleet",
        "ROLLOUT_NAMESPACE": "fleet-default",
    }


@ON_THE_APISERVER
async def test_helm_install_on_the_apiserver_and_the_bridge_runs_with_its_role(
    helm: list[str], kube: AsyncClient, kubeconfig: Path, namespace: str, kafka_bootstrap: str, topic_prefix: str
) -> None:
    """`helm install` creates every object (the apiserver validates each); the chart's bridge
    account, with only its Role, publishes a release and writes its status, and is refused
    what the Role does not grant (changing a sequence)."""
    installed_rollout_crds(kubeconfig)
    release = f"r{uuid.uuid4().hex[:6]}"
    run_helm(helm, "install", release, str(CHART), "--namespace", namespace, "--kubeconfig", str(kubeconfig))
    deployments = sorted([d.metadata.name async for d in kube.list(Deployment, namespace=namespace)])
    assert deployments == sorted(
        f"{release}-{name}" for name in ("bridge", "executor", "health-monitor", "inventory", "planner")
    )
    role = await kube.get(Role, f"{release}-bridge", namespace=namespace)
    assert role.rules is not None and len(role.rules) == 5
    await kube.get(ServiceAccount, f"{release}-bridge", namespace=namespace)

    account = await kubeconfig_for_account(
        kube, admin_kubeconfig=kubeconfig, namespace=namespace, name=f"{release}-bridge", folder=kubeconfig.parent
    )
    settings = bridge_settings(
        kubeconfig=account, namespace=namespace, prefix=topic_prefix, bootstrap=kafka_bootstrap, name="pod-a"
    ).model_copy(update={"lease_name": f"{release}-bridge"})
    made = await kube.create(
        UpgradeRelease(metadata={"name": "r-1", "namespace": namespace}, spec={"version": "1.31.2"})
    )
    async with running(settings) as (replica, _):

        async def published() -> Any:
            now = await kube.get(UpgradeRelease, "r-1", namespace=namespace)
            return now if (now.status or {}).get("publishedGeneration") == 1 else None

        now = await eventually(published, what="the release published by the chart's bridge account")
        assert now.status["eventId"] == f"k8s/release/{made.metadata.uid}/1"
        assert replica.bridge is not None and replica.bridge.published == 1
    limited = AsyncClient(KubeConfig.from_file(str(account)), field_manager="least-privilege-test")
    try:
        sequence = UpgradeSequence(
            metadata={"name": "s-1", "namespace": namespace},
            spec={"stages": [{"name": "a", "clusterNames": ["x"]}]},
        )
        with pytest.raises(ApiError) as refused:
            await limited.create(sequence)
        assert refused.value.status.code == 403
        with pytest.raises(ApiError) as refused:
            await limited.patch(
                UpgradeRelease, "r-1", {"metadata": {"labels": {"x": "y"}}}, namespace=namespace,
                patch_type=PatchType.MERGE,
            )  # fmt: skip
        assert refused.value.status.code == 403
    finally:
        await limited.close()


SETTINGS_BY_COMPONENT: dict[str, type[BaseSettings]] = {
    "planner": PlannerSettings,
    "executor": ExecutorSettings,
    "health-monitor": MonitorSettings,
    "inventory": InventorySettings,
    "bridge": BridgeSettings,
}


def test_every_service_of_the_chart_accepts_its_settings(helm: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Each Deployment's ROLLOUT_* variables (its ConfigMaps, Secret and env) are settings its
    service knows, with values it accepts: the settings model is built from exactly them."""
    rendered = run_helm(
        helm, "template", "r3", str(CHART), "--namespace", "rollout", "--set", "redis.password=pw",
        "--set", "managementCluster.kubeconfigSecret=mgmt",
    )  # fmt: skip
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    data = {d["metadata"]["name"]: d.get("data") or d.get("stringData") or {} for d in docs if d["kind"] in _HOLDERS}
    checked = []
    for deployment in (d for d in docs if d["kind"] == "Deployment"):
        component = deployment["metadata"]["labels"]["app.kubernetes.io/component"]
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        env: dict[str, str] = {}
        for source in container.get("envFrom", []):
            ref = source.get("configMapRef") or source.get("secretRef")
            env.update(data[ref["name"]])
        env.update({item["name"]: item.get("value", "pod-name") for item in container.get("env", [])})
        model = SETTINGS_BY_COMPONENT[component]
        assert set(env) - accepted_env_names(model) == set(), component
        with monkeypatch.context() as patched:
            for name, value in env.items():
                patched.setenv(name, str(value))
            model()
        checked.append(component)
    assert sorted(checked) == sorted(SETTINGS_BY_COMPONENT)
