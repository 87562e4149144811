"""The Kubernetes probe against real API servers: the workload cluster's kubeconfig from its
`<cluster>-kubeconfig` Secret in the management cluster (as Cluster API keeps it), `/readyz`,
every Node Ready, and the versions it runs reported with the heartbeat."""

from __future__ import annotations

import base64
import contextlib
import uuid
from pathlib import Path

import pytest
from lightkube import AsyncClient, KubeConfig
from lightkube.models.core_v1 import NodeCondition, NodeStatus, NodeSystemInfo
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Node, Secret

from rollout_adapters.memory_bus import MemoryBus
from rollout_common.envelope import decode
from rollout_common.heartbeat import Heartbeat
from rollout_common.topics.catalog import HEARTBEATS
from rollout_health.probes.kubernetes import KubernetesProbe
from rollout_health.probes.port import ProbeResult
from rollout_health.reporter import Reporter
from rollout_health.settings import KubernetesProbeSettings

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.integration]


def _info(kubelet: str) -> NodeSystemInfo:
    return NodeSystemInfo(
        architecture="amd64", bootID="b", containerRuntimeVersion="containerd://2.0.0", kernelVersion="6.1",
        kubeProxyVersion=kubelet, kubeletVersion=kubelet, machineID="m", operatingSystem="linux",
        osImage="Debian", systemUUID="u",
    )  # fmt: skip


def _base64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


async def add_node(workload: AsyncClient, name: str, *, kubelet: str, ready: bool) -> None:
    await workload.create(Node(metadata=ObjectMeta(name=name)))
    condition = NodeCondition(type="Ready", status="True" if ready else "False", reason="KubeletReady")
    status = NodeStatus(conditions=[condition], nodeInfo=_info(kubelet))
    await workload.replace(Node.Status(metadata=ObjectMeta(name=name), status=status))  # type: ignore[attr-defined]


async def test_ready_nodes_and_versions_from_the_capi_kubeconfig_secret(
    kube: AsyncClient, workload_kubeconfig: Path, namespace: str, kubeconfig: Path
) -> None:
    cluster = f"wl-{uuid.uuid4().hex[:6]}"
    data = {"value": _base64(workload_kubeconfig)}
    await kube.create(Secret(metadata=ObjectMeta(name=f"{cluster}-kubeconfig", namespace=namespace), data=data))
    workload = AsyncClient(KubeConfig.from_file(str(workload_kubeconfig)))
    probe = KubernetesProbe(KubernetesProbeSettings(kubeconfig=kubeconfig, namespace=namespace))
    await probe.start()
    try:
        await add_node(workload, f"{cluster}-a", kubelet="v1.34.2", ready=True)
        await add_node(workload, f"{cluster}-b", kubelet="v1.33.5", ready=True)
        result = await probe.check(cluster)
        assert result.ready, result
        assert (result.control_plane_version, result.node_version) == ("v1.34.2", "v1.33.5")
        # The reporter carries the versions in the heartbeat.
        bus = MemoryBus()
        await bus.ensure_topics([HEARTBEATS.spec()])
        reporter = Reporter(bus=bus, probe=probe, clusters=[cluster], reporter_id="r1")
        await reporter.tick()
        _, heartbeat = decode(bus.records(HEARTBEATS.name)[0].value, bus.records(HEARTBEATS.name)[0].headers,
                              HEARTBEATS.models)  # fmt: skip
        assert isinstance(heartbeat, Heartbeat)
        assert (heartbeat.ready, heartbeat.control_plane_version, heartbeat.node_version) == (
            True,
            "v1.34.2",
            "v1.33.5",
        )
        await add_node(workload, f"{cluster}-c", kubelet="v1.34.2", ready=False)
        result = await probe.check(cluster)
        assert result == ProbeResult(
            ready=False, detail=f"nodes not Ready: {cluster}-c", control_plane_version="v1.34.2", node_version="v1.33.5"
        )
    finally:
        for name in ("a", "b", "c"):
            with contextlib.suppress(Exception):
                await workload.delete(Node, f"{cluster}-{name}")
        await workload.close()
        await probe.close()


async def test_a_missing_secret_is_a_not_ready_result_with_the_reason(kubeconfig: Path, namespace: str) -> None:
    probe = KubernetesProbe(KubernetesProbeSettings(kubeconfig=kubeconfig, namespace=namespace))
    await probe.start()
    try:
        result = await probe.check("nowhere")
    finally:
        await probe.close()
    assert result == ProbeResult(
        ready=False,
        detail=f'reading Secret {namespace}/nowhere-kubeconfig: not found: secrets "nowhere-kubeconfig" not found',
    )
