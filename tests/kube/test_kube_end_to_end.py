"""The fleet from a management cluster, end to end, as processes on the real broker and Redis.

A management apiserver holds six Cluster API clusters (built from a ClusterClass) in two stages
(env=canary, env=prod); two workload apiservers stand behind their `<cluster>-kubeconfig` Secrets. The planner, two
executors (Cluster API driver), the inventory watcher, a reporter (Kubernetes probe) and the
health monitor run as `python -m ...`; the test's simulated provider (capi_world) moves `status`
to the new version a second after it is set. The release goes to the version the workload
apiservers really serve (their `/version`): the planner counts an upgrade done only when the
cluster reports the version it went to. Mid-rollout one prod cluster is relabelled to
canary (it moves between stages, SEQ-6/6a) and another is deleted (it leaves the fleet); the
rollout completes with every remaining cluster running the new version.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
import redis.asyncio as aioredis
from capi_world import SimulatedProvider, create_cluster
from lightkube import AsyncClient, KubeConfig
from lightkube.config import client_adapter
from lightkube.models.core_v1 import NodeCondition, NodeStatus
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Node, Secret
from lightkube.types import PatchType

from rollout_adapters.kube.resources import CapiCluster, KubeadmControlPlane, MachineDeployment
from rollout_common.topics.catalog import PROGRESS, STAGE_ADVANCE

# The end-to-end helpers of tests/e2e (processes, the CLI's apply, an outside producer).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from e2e_system import apply_fleet, publish_release, read_until
from service_processes import ServiceProcesses
from topic_reader import completions

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

CANARY = ["canary-1", "canary-2"]
PROD = ["prod-1", "prod-2", "prod-3", "prod-4"]
MOVED, DELETED = "prod-4", "prod-3"
TIME_SCALE = 3600.0  # each 2 h soak takes 2 s
COMPLETE_TIMEOUT_S = 150.0


def sequence_document() -> dict[str, Any]:
    stage = {"soak": "2h", "rolloutStrategy": {"maxNew": 2, "maxUnavailable": "50%"}}
    return {
        "name": "kube-e2e",
        "sequence": {
            "name": "kube-e2e",
            "channel": "regular",
            "stages": [
                {"name": "canary", "clusterSelector": {"matchLabels": {"env": "canary"}}, **stage},
                {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}, **stage},
            ],
        },
    }


def _encoded(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


async def ready_node(workload: Path, name: str) -> None:
    client = AsyncClient(KubeConfig.from_file(str(workload)))
    try:
        await client.create(Node(metadata=ObjectMeta(name=name)))
        status = NodeStatus(conditions=[NodeCondition(type="Ready", status="True", reason="KubeletReady")])
        await client.replace(Node.Status(metadata=ObjectMeta(name=name), status=status))  # type: ignore[attr-defined]
    finally:
        await client.close()


async def remove_node(workload: Path, name: str) -> None:
    client = AsyncClient(KubeConfig.from_file(str(workload)))
    try:
        with contextlib.suppress(Exception):
            await client.delete(Node, name)
    finally:
        await client.close()


async def served_version(workload: Path) -> tuple[int, int, int]:
    """What a workload apiserver's `/version` says, as (major, minor, patch)."""
    http = client_adapter.AsyncClient(
        KubeConfig.from_file(str(workload)).get(), client_adapter.ConnectionParams(timeout=httpx.Timeout(10.0))
    )
    try:
        git_version = (await http.get("/version")).json()["gitVersion"]
    finally:
        await http.aclose()
    major, minor, patch = git_version.lstrip("v").split("-")[0].split("+")[0].split(".")
    return int(major), int(minor), int(patch)


async def planner_clusters(redis_url: str, prefix: str) -> int | None:
    client = aioredis.Redis.from_url(redis_url)
    try:
        raw = await client.get(f"{prefix}:status")
        return None if raw is None else int(json.loads(raw)["clusters"])
    finally:
        await client.aclose()


def start_services(
    services: ServiceProcesses, *, prefix: str, namespace: str, kubeconfig: Path, tmp_path: Path
) -> None:
    services.start(
        "planner",
        ["rollout_planner.service"],
        {"ROLLOUT_REDIS_NAMESPACE": prefix, "ROLLOUT_TIME_SCALE": str(TIME_SCALE), "ROLLOUT_HTTP_PORT": "0",
         "ROLLOUT_POLL_TIMEOUT_S": "0.2"},
    )  # fmt: skip
    for number in range(2):
        services.start(
            f"executor-{number}",
            ["rollout_executor"],
            {
                "ROLLOUT_EXECUTOR_ID": f"executor-{number}",
                "ROLLOUT_GROUP_ID": f"{prefix}executors",
                "ROLLOUT_REDIS_NAMESPACE": f"{prefix}executors",
                "ROLLOUT_DRIVER": "cluster-api",
                "ROLLOUT_CLUSTER_API__KUBECONFIG": str(kubeconfig),
                "ROLLOUT_CLUSTER_API__NAMESPACE": namespace,
                "ROLLOUT_CLUSTER_API__POLL_INTERVAL_S": "0.2",
                "ROLLOUT_CLUSTER_API__TIMEOUT_S": "60",
                "ROLLOUT_LEASE_S": "3",
                "ROLLOUT_METRICS_PORT": "0",
            },
        )
    services.start(
        "watcher",
        ["rollout_health", "inventory"],
        {"ROLLOUT_KUBECONFIG": str(kubeconfig), "ROLLOUT_NAMESPACE": namespace,
         "ROLLOUT_CHECKPOINT_FILE": str(tmp_path / "inventory.json")},
    )  # fmt: skip
    services.start(
        "reporter",
        ["rollout_health", "reporter"],
        {
            "ROLLOUT_CLUSTERS": json.dumps(CANARY + PROD),
            "ROLLOUT_PROBE": "kubernetes",
            "ROLLOUT_KUBERNETES__KUBECONFIG": str(kubeconfig),
            "ROLLOUT_KUBERNETES__NAMESPACE": namespace,
            "ROLLOUT_PROBE_INTERVAL_S": "0.5",
            "ROLLOUT_HEARTBEAT_INTERVAL_S": "2",
        },
    )
    services.start(
        "monitor",
        ["rollout_health", "monitor"],
        {
            "ROLLOUT_STALENESS_LIMIT_S": "60",
            "ROLLOUT_CHECK_INTERVAL_S": "1",
            "ROLLOUT_DATA_DIR": str(tmp_path / "monitor-data"),
        },
    )


async def test_a_release_rolls_through_cluster_api_clusters_relabelled_and_deleted_mid_rollout_seq_6(
    kube: AsyncClient,
    kubeconfig: Path,
    workload_kubeconfigs: list[Path],
    namespace: str,
    kafka_bootstrap: str,
    redis_url: str,
    topic_prefix: str,
    tmp_path: Path,
) -> None:
    prefix = topic_prefix + "."
    served = {await served_version(workload) for workload in workload_kubeconfigs}
    assert len(served) == 1, f"the workload apiservers serve different versions: {served}"
    major, minor, patch = served.pop()
    start, target = f"{major}.{minor - 1}.0", f"{major}.{minor}.{patch}"
    for index, name in enumerate(CANARY + PROD):
        env = "canary" if name in CANARY else "prod"
        await create_cluster(kube, name, namespace, version=f"v{start}", labels={"env": env}, topology=True)
        workload = workload_kubeconfigs[index % 2]
        secret = Secret(metadata=ObjectMeta(name=f"{name}-kubeconfig", namespace=namespace),
                        data={"value": await asyncio.to_thread(_encoded, workload)})  # fmt: skip
        await kube.create(secret)
    nodes = [(workload, f"{namespace}-node-{i}") for i, workload in enumerate(workload_kubeconfigs)]
    for workload, node in nodes:
        await ready_node(workload, node)
    await asyncio.to_thread(apply_fleet, sequence_document(), tmp_path=tmp_path, prefix=prefix,
                            kafka_bootstrap=kafka_bootstrap, redis_url=redis_url)  # fmt: skip
    services = ServiceProcesses(
        log_dir=tmp_path,
        base_env={"ROLLOUT_KAFKA_BOOTSTRAP": kafka_bootstrap, "ROLLOUT_REDIS_URL": redis_url,
                  "ROLLOUT_TOPIC_PREFIX": prefix, "ROLLOUT_LOG_LEVEL": "INFO"},
    )  # fmt: skip

    def alive(_: list[Any]) -> None:
        assert not services.exited(), f"exited: {services.exited()}\n" + "\n".join(
            services.log_tail(name) for name in services.exited()
        )

    try:
        async with SimulatedProvider(kube, namespace, delay_s=1.0).running():
            start_services(services, prefix=prefix, namespace=namespace, kubeconfig=kubeconfig, tmp_path=tmp_path)
            async with asyncio.timeout(60):  # the watcher's inventory reached the planner
                while await planner_clusters(redis_url, prefix) != 6:
                    alive([])
                    await asyncio.sleep(0.3)
            await publish_release(
                kafka_bootstrap, prefix, event_id="rel-kube", targets={f"{major}.{minor - 1}": target}
            )
            # Mid-rollout: once the first batch is handed out, move one prod cluster to canary and
            # delete another (prod has not started: it waits for canary's soak).
            await read_until(kafka_bootstrap, prefix + STAGE_ADVANCE.name, STAGE_ADVANCE.partitions,
                             lambda records: len(records) >= 1, timeout_s=60, on_poll=alive)  # fmt: skip
            await kube.patch(CapiCluster, MOVED, {"metadata": {"labels": {"env": "canary"}}}, namespace=namespace,
                             patch_type=PatchType.MERGE)  # fmt: skip
            await kube.delete(CapiCluster, DELETED, namespace=namespace)
            try:
                records = await read_until(kafka_bootstrap, prefix + PROGRESS.name, PROGRESS.partitions,
                                           lambda rs: len(completions(rs)) == 4, timeout_s=COMPLETE_TIMEOUT_S,
                                           on_poll=alive)  # fmt: skip
            except TimeoutError:
                pytest.fail(f"not complete in {COMPLETE_TIMEOUT_S} s; planner log:\n{services.log_tail('planner')}")
        assert completions(records) == {(s, t): target for s in ("canary", "prod") for t in ("controlPlane", "nodes")}

        def handed_out(records: list[Any]) -> set[tuple[str, str]]:
            return {(json.loads(r.value)["stage"], c) for r in records for c in json.loads(r.value)["clusters"]}

        expected = {("canary", c) for c in (*CANARY, MOVED)} | {("prod", "prod-1"), ("prod", "prod-2")}
        advances = await read_until(kafka_bootstrap, prefix + STAGE_ADVANCE.name, STAGE_ADVANCE.partitions,
                                    lambda rs: expected <= handed_out(rs), timeout_s=10)  # fmt: skip
        handed = handed_out(advances)
        assert {c for s, c in handed if s == "canary"} == {*CANARY, MOVED}
        assert {c for s, c in handed if s == "prod"} == {"prod-1", "prod-2"}
        assert await planner_clusters(redis_url, prefix) == 5
        for name in (*CANARY, "prod-1", "prod-2", MOVED):
            cp = await kube.get(KubeadmControlPlane, f"{name}-cp", namespace=namespace)
            md = await kube.get(MachineDeployment, f"{name}-workers", namespace=namespace)
            assert (cp.status["version"], md.spec["template"]["spec"]["version"]) == (f"v{target}",) * 2, name
        # The deleted cluster's control plane was never touched.
        left = await kube.get(KubeadmControlPlane, f"{DELETED}-cp", namespace=namespace)
        assert left.spec["version"] == f"v{start}"
    finally:
        services.stop_all()
        for workload, node in nodes:
            await remove_node(workload, node)
