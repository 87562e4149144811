"""A probe that asks each workload cluster's own API: `/readyz`, every Node `Ready`, and the
versions it actually runs (the API server's `/version`, the oldest kubelet).

The workload cluster's credentials come from the kubeconfig Cluster API keeps in the management
cluster, in the Secret `<cluster>-kubeconfig` (key `value`), or from a kubeconfig file with one
context per cluster, named as the cluster. A client per cluster is kept between rounds and made
again after a failure (a rotated Secret is read anew).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import httpx2 as httpx
import yaml
from lightkube import AsyncClient, KubeConfig
from lightkube.config import client_adapter
from lightkube.resources.core_v1 import Node, Secret

from rollout_adapters.kube.client import async_client, translate
from rollout_common.errors import InvalidInputError, PermanentError, RolloutError
from rollout_common.safe_names import check_cluster_name
from rollout_health.probes.port import ProbeResult
from rollout_health.settings import KubernetesProbeSettings

SECRET_KEY = "value"


@dataclass
class _Workload:
    api: AsyncClient
    http: httpx.AsyncClient

    async def close(self) -> None:
        await self.api.close()
        await self.http.aclose()


def oldest(versions: list[str]) -> str | None:
    def key(version: str) -> tuple[int, ...]:
        core = version.lstrip("v").split("-")[0].split("+")[0]
        return tuple(int(part) if part.isdigit() else 0 for part in core.split("."))

    return min(versions, key=key) if versions else None


def _node_ready(node: Node) -> bool:
    conditions = (node.status.conditions if node.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


class KubernetesProbe:
    name = "kubernetes"

    def __init__(self, settings: KubernetesProbeSettings) -> None:
        self._settings = settings
        self._management: AsyncClient | None = None
        self._workloads: dict[str, _Workload] = {}

    async def start(self) -> None:
        if self._settings.workload_kubeconfig is None:
            self._management = async_client(
                kubeconfig=self._settings.kubeconfig, context=self._settings.kube_context, field_manager="rollout-probe"
            )

    async def close(self) -> None:
        for workload in self._workloads.values():
            await workload.close()
        self._workloads.clear()
        if self._management is not None:
            await self._management.close()
            self._management = None

    async def _config(self, cluster: str) -> Any:
        if self._settings.workload_kubeconfig is not None:
            config = KubeConfig.from_file(str(self._settings.workload_kubeconfig)).get(context_name=cluster)
            if config is None:
                raise PermanentError(f"{self._settings.workload_kubeconfig} has no context {cluster!r}")
            return config
        if self._management is None:
            raise RuntimeError("KubernetesProbe.start() was not called")
        name = f"{cluster}-kubeconfig"
        try:
            secret = await self._management.get(Secret, name, namespace=self._settings.namespace)
        except Exception as exc:
            raise translate(exc, doing=f"reading Secret {self._settings.namespace}/{name}") from exc
        data = (secret.data or {}).get(SECRET_KEY)
        if data is None:
            raise PermanentError(f"Secret {self._settings.namespace}/{name} has no key {SECRET_KEY!r}")
        return KubeConfig.from_dict(yaml.safe_load(base64.b64decode(data))).get()

    async def _workload(self, cluster: str) -> _Workload:
        workload = self._workloads.get(cluster)
        if workload is None:
            config = await self._config(cluster)
            timeout = httpx.Timeout(self._settings.timeout_s)
            workload = _Workload(
                api=AsyncClient(config, timeout=timeout),
                http=client_adapter.AsyncClient(
                    config, client_adapter.ConnectionParams(timeout=timeout, trust_env=False)
                ),
            )
            self._workloads[cluster] = workload
        return workload

    async def check(self, cluster: str) -> ProbeResult:
        try:
            check_cluster_name(cluster)
        except InvalidInputError as exc:
            return ProbeResult(ready=False, detail=f"rejected: {exc}")
        try:
            return await self._check(cluster, await self._workload(cluster))
        except RolloutError as exc:
            await self._forget(cluster)
            return ProbeResult(ready=False, detail=str(exc)[:500])
        except Exception as exc:
            await self._forget(cluster)
            return ProbeResult(ready=False, detail=str(translate(exc, doing=f"probing {cluster}"))[:500])

    async def _forget(self, cluster: str) -> None:
        workload = self._workloads.pop(cluster, None)
        if workload is not None:
            await workload.close()

    async def _check(self, cluster: str, workload: _Workload) -> ProbeResult:
        readyz = await workload.http.get("/readyz")
        version_answer = await workload.http.get("/version")
        api_version = version_answer.json().get("gitVersion") if version_answer.status_code == 200 else None
        nodes = [node async for node in workload.api.list(Node)]
        # a node that has not reported its info yet has no kubelet version: unknown, not the oldest
        kubelets = [n.status.nodeInfo.kubeletVersion for n in nodes if n.status and n.status.nodeInfo]
        kubelets = [version for version in kubelets if version]
        versions: dict[str, Any] = {"control_plane_version": api_version, "node_version": oldest(kubelets)}
        if readyz.status_code != 200:
            return ProbeResult(ready=False, detail=f"/readyz answered {readyz.status_code}", **versions)
        not_ready = sorted(
            n.metadata.name or "?"
            for n in nodes
            if n.metadata
            and not any(
                c.type == "Ready" and c.status == "True" for c in (n.status.conditions if n.status else []) or []
            )
        )
        if not nodes:
            return ProbeResult(ready=False, detail="no nodes", **versions)
        if not_ready:
            return ProbeResult(ready=False, detail=f"nodes not Ready: {', '.join(not_ready)}", **versions)
        return ProbeResult(ready=True, **versions)
