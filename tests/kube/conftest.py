"""A real Kubernetes API server for the tests that need one: `KUBECONFIG` when set (its admin
context; the CRDs are applied to it), else etcd and kube-apiserver on this machine through
`rollout_devenv` (built once per machine by `make kube-build`). Missing, it fails the tests."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from helm_run import helm_command
from lightkube import AsyncClient, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace

from rollout_devenv import DevenvError, KubeStack
from rollout_devenv.kube import cluster_api_crds, fleet_crds, install_crds


@pytest.fixture(scope="session")
def kube_stack() -> Iterator[KubeStack | None]:
    """The local stack this session started, or None when `KUBECONFIG` names a running cluster."""
    if path := os.environ.get("KUBECONFIG"):
        try:
            install_crds(Path(path), [*cluster_api_crds(), *fleet_crds()])
        except DevenvError as exc:
            pytest.fail(f"cannot install the CRDs into KUBECONFIG={path}:\n{exc.full_text()}", pytrace=False)
        yield None
        return
    # The first is the management cluster, the others workload clusters (the probe, the end to end).
    stack = KubeStack(count=3)
    try:
        stack.start()
    except DevenvError as exc:
        error = exc
    else:
        try:
            yield stack
        finally:
            stack.stop(remove_data=True)
        return
    pytest.fail(f"the local Kubernetes API server could not be started:\n{error.full_text()}", pytrace=False)


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The helm command, its caches in a temporary folder."""
    return helm_command(tmp_path_factory.mktemp("helm-home"))


@pytest.fixture(scope="session")
def kubeconfig(kube_stack: KubeStack | None) -> Path:
    """The admin's kubeconfig of the management cluster."""
    return kube_stack.management.kubeconfig if kube_stack is not None else Path(os.environ["KUBECONFIG"])


@pytest.fixture(scope="session")
def workload_kubeconfigs(kube_stack: KubeStack | None) -> list[Path]:
    """The admin's kubeconfigs of two workload clusters (with `KUBECONFIG`: that same cluster twice)."""
    if kube_stack is None:
        return [Path(os.environ["KUBECONFIG"])] * 2
    return [server.kubeconfig for server in kube_stack.apiservers[1:]]


@pytest.fixture(scope="session")
def workload_kubeconfig(workload_kubeconfigs: list[Path]) -> Path:
    return workload_kubeconfigs[0]


@pytest.fixture
async def kube(kubeconfig: Path) -> AsyncIterator[AsyncClient]:
    client = AsyncClient(KubeConfig.from_file(str(kubeconfig)), field_manager="rollout-tests")
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def namespace(kube: AsyncClient) -> str:
    """A namespace of this test's own (nothing runs the namespace controller, so it is never
    emptied; watchers in tests watch their own namespace only)."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    await kube.create(Namespace(metadata=ObjectMeta(name=name)))
    return name
