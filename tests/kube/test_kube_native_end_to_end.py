"""Kubernetes-native control, end to end: `kubectl apply` of a sequence and a release, the rollout
runs through the services (planner, two executors, health reporter and monitor, and the bridge,
all as processes on the real broker and Redis), and the rollout resource's printer columns, read
through the API's table output as `kubectl get` reads them, say where it is and why it waits."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from bridge_harness import cells, eventually, table
from lightkube import AsyncClient
from rollout_crd_install import installed_rollout_crds

from rollout_adapters.kube_bridge.resources import UpgradeSequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from e2e_system import Pace, apply_fleet, staged_cluster_names, staged_fleet, start_system, wait_for_fleet
from service_processes import ServiceProcesses

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

OLD, NEW = "1.30.5", "1.31.2"
STAGES = ("canary", "prod")
PACE = Pace(time_scale=3600.0, upgrade_s=0.5, max_concurrent=5, ready_after_s=0.5)
# 24 h of canary soak is 24 s here: long enough to read the wait from the table at leisure.
SOAKS = {"canary": "24h", "prod": "1h"}


def _kubectl_apply(kubeconfig: Path, namespace: str, document: dict[str, Any], folder: Path) -> None:
    path = folder / f"{document['kind']}-{document['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(document))
    command = ["kubectl", "--kubeconfig", str(kubeconfig), "-n", namespace, "apply", "-f", str(path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


async def test_kubectl_apply_a_sequence_and_a_release_and_kubectl_get_shows_the_rollout(
    kube: AsyncClient, kubeconfig: Path, namespace: str, kafka_bootstrap: str, redis_url: str, topic_prefix: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    """SEQ-7 (the applied sequence is a change the planner accepts, shown as a condition), START-1
    (the release starts the rollout), STAT-5 (stage, state and the wait in the printer columns)."""
    installed_rollout_crds(kubeconfig)
    prefix = topic_prefix + "."
    fleet = staged_fleet(name="kube-native", stages=STAGES, per_stage=2, version=OLD, soak=SOAKS, max_new=2)
    fleet["simulation"] = {"upgradeDuration": {"controlPlane": "10m", "nodes": "10m"}, "readyAfter": "1m"}
    await asyncio.to_thread(
        apply_fleet, fleet, tmp_path=tmp_path, prefix=prefix, kafka_bootstrap=kafka_bootstrap, redis_url=redis_url
    )
    services = ServiceProcesses(
        log_dir=tmp_path,
        base_env={"ROLLOUT_KAFKA_BOOTSTRAP": kafka_bootstrap, "ROLLOUT_REDIS_URL": redis_url,
                  "ROLLOUT_TOPIC_PREFIX": prefix, "ROLLOUT_LOG_LEVEL": "INFO"},
    )  # fmt: skip
    try:
        clusters = staged_cluster_names(STAGES, 2)
        start_system(services, prefix=prefix, clusters=clusters, pace=PACE)
        services.start(
            "bridge",
            ["rollout_adapters.kube_bridge", "run"],
            {"ROLLOUT_KUBECONFIG": str(kubeconfig), "ROLLOUT_NAMESPACE": namespace, "ROLLOUT_IDENTITY": "bridge-0"},
        )
        await wait_for_fleet(redis_url, prefix, services, clusters=len(clusters))
        # The sequence as Git holds it: the same one, prod now soaking 2h (a change the planner takes).
        sequence = {**fleet["sequence"]}
        sequence["stages"] = [{**stage} for stage in sequence["stages"]]
        sequence["stages"][1]["soak"] = "2h"
        _kubectl_apply(
            kubeconfig, namespace,
            {"apiVersion": "rollout.dev/v1alpha1", "kind": "UpgradeSequence", "metadata": {"name": "fleet"},
             "spec": sequence},
            tmp_path,
        )  # fmt: skip

        async def accepted() -> Any:
            now = await kube.get(UpgradeSequence, "fleet", namespace=namespace)
            found = [c for c in (now.status or {}).get("conditions") or [] if c["status"] == "True"]
            return found[0] if found else None

        condition = await eventually(accepted, what="the planner accepted the applied sequence", timeout_s=90)
        assert (condition["type"], condition["reason"], condition["message"]) == (
            "Accepted",
            "Accepted",
            "sequence change applied",
        )
        _kubectl_apply(
            kubeconfig, namespace,
            {"apiVersion": "rollout.dev/v1alpha1", "kind": "UpgradeRelease", "metadata": {"name": "r-1-31-2"},
             "spec": {"channel": "regular", "targets": {"1.30": NEW}}},
            tmp_path,
        )  # fmt: skip
        path = f"/apis/rollout.dev/v1alpha1/namespaces/{namespace}/upgraderollouts"

        async def soaking() -> Any:
            assert not services.exited(), services.log_tail(next(iter(services.exited())))
            rows = cells(await table(kubeconfig, path))
            return rows[0] if rows and (rows[0]["Waiting"] or "").startswith("SOAK-2") else None

        row = await eventually(soaking, what="the rollout shown waiting for canary's soak", timeout_s=120)
        assert (row["Name"], row["Version"], row["Stage"], row["State"]) == ("kube-native-1", NEW, "canary", "RUNNING")

        async def completed() -> Any:
            rows = cells(await table(kubeconfig, path))
            return rows[0] if rows and rows[0]["State"] == "COMPLETED" else None

        done = await eventually(completed, what="the rollout shown completed", timeout_s=120)
        assert (done["Stage"], done["Version"], done["Waiting"] or "") == ("prod", NEW, "")
    finally:
        services.stop_all()
