"""`make kube` (python -m rollout_devenv kube run): etcd and a kube-apiserver with the Cluster API
and Fleet CRDs, a kubeconfig that works, stopped cleanly by Ctrl-C; several apiservers share one
etcd without seeing each other's objects."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from lightkube import ApiError, Client, KubeConfig
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition

from rollout_devenv import DevenvError, KubeApiServer, KubeStack, stop_processes
from rollout_devenv.kube import EtcdServer

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CRDS = {
    "clusters.cluster.x-k8s.io",
    "clusterclasses.cluster.x-k8s.io",
    "machinedeployments.cluster.x-k8s.io",
    "machinesets.cluster.x-k8s.io",
    "machines.cluster.x-k8s.io",
    "kubeadmcontrolplanes.controlplane.cluster.x-k8s.io",
    "clusters.fleet.cattle.io",
    "clustergroups.fleet.cattle.io",
}


def _crds(kubeconfig: Path) -> set[str]:
    client = Client(KubeConfig.from_file(str(kubeconfig)))
    try:
        return {
            crd.metadata.name for crd in client.list(CustomResourceDefinition) if crd.metadata and crd.metadata.name
        }
    finally:
        client.close()


def _descendants(pid: int) -> set[int]:
    """Every process below `pid` now (the servers run in sessions of their own, still its children)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            # the name, in parentheses, may hold spaces: the parent pid is the 2nd field after it
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@dataclass
class _Served:
    process: subprocess.Popen[str]
    kubeconfig: Path
    servers: set[int]  # the pids under the process once the stack is up (etcd, kube-apiserver, ...)


@contextlib.contextmanager
def _serving(argv: list[str]) -> Iterator[_Served]:
    """`argv` started as a terminal starts it (a process group of its own), until it prints KUBECONFIG=;
    afterwards whatever of it is left is stopped."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop("KUBECONFIG", None)
    process = subprocess.Popen(
        argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        # `make kube` first prints the binary's path (kube-build), then KUBECONFIG= once the stack is up.
        line = process.stdout.readline()
        if not line.startswith("KUBECONFIG="):
            line = process.stdout.readline()
        assert line.startswith("KUBECONFIG="), (line, process.stderr.read() if process.poll() is not None else "")
        kubeconfig = Path(line.strip().split("=", 1)[1])
        assert _crds(kubeconfig) == CRDS
        config = json.loads(kubeconfig.read_text())
        assert config["clusters"][0]["cluster"]["server"].startswith("https://127.0.0.1:")
        yield _Served(process, kubeconfig, _descendants(process.pid))
    finally:
        stop_processes([process], whole_group=True)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def _assert_stopped_cleanly(served: _Served) -> None:
    """What Ctrl-C must do, whoever started the stack: stop every server it started, say so, and
    remove the kubeconfig with the apiserver's data dir."""
    assert served.servers, "no server processes seen under the stack"
    assert not [pid for pid in served.servers if _alive(pid)]
    assert not served.kubeconfig.exists()
    assert served.process.stderr is not None
    assert "stopping..." in served.process.stderr.read()


def test_kube_run_serves_until_ctrl_c_and_exits_0() -> None:
    """The devenv's own behaviour, without make in between: Ctrl-C in the terminal (SIGINT to the
    whole foreground group) stops the servers in order and exits 0."""
    with _serving([sys.executable, "-m", "rollout_devenv", "kube", "run"]) as served:
        os.killpg(served.process.pid, signal.SIGINT)
        assert served.process.wait(timeout=60) == 0
        _assert_stopped_cleanly(served)


def test_make_kube_serves_until_ctrl_c() -> None:
    """`make kube` runs the same: what it prints, and that Ctrl-C leaves nothing running. make's own
    exit status is not ours: it reports 0 or dies of the SIGINT, depending on whether the signal
    reaches it before its child has exited (the child's exit is asserted above)."""
    with _serving(["make", "-s", "kube"]) as served:
        os.killpg(served.process.pid, signal.SIGINT)  # Ctrl-C in the terminal reaches make and its child
        served.process.wait(timeout=60)
        _assert_stopped_cleanly(served)


def test_apiservers_share_etcd_under_their_own_prefixes(kube_stack: KubeStack | None) -> None:
    """The session's stack: the management cluster has the CRDs, a workload cluster on the same
    etcd sees none of them. Tests that ran before may have added the project's own resources
    (rollout.dev, from the chart) to the management cluster, never another group."""
    if kube_stack is None:  # KUBECONFIG names a cluster of its own: the fixture installed the CRDs there
        assert _crds(Path(os.environ["KUBECONFIG"])) >= CRDS
        return
    management, workload = kube_stack.apiservers[:2]
    found = _crds(management.kubeconfig)
    assert found >= CRDS
    assert {name for name in found - CRDS if not name.endswith(".rollout.dev")} == set()
    assert _crds(workload.kubeconfig) == set()
    client = Client(KubeConfig.from_file(str(workload.kubeconfig)))
    try:
        with pytest.raises(ApiError) as denied:
            client.get(CustomResourceDefinition, "clusters.cluster.x-k8s.io")
        assert denied.value.status.code == 404
    finally:
        client.close()
    starts = [round(server.last_start_s or 0, 1) for server in kube_stack.apiservers]
    print(f"apiservers ready in {starts} s, CRDs in {kube_stack.crd_install_s or 0:.1f} s")


def test_a_binary_that_cannot_be_built_is_an_error_with_the_build_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A missing apiserver is built on first use; when that fails, the fixtures turn the error
    into a failed test, never a skip."""
    monkeypatch.setenv("ROLLOUT_CACHE_DIR", str(tmp_path / "cache"))  # nothing built there
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "go").write_text(
        "#!/bin/sh\necho 'go: k8s.io/kubernetes@v1.34.2: reading proxy: 403 Forbidden' >&2\nexit 1\n"
    )
    (tools / "go").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    etcd = EtcdServer(data_dir=tmp_path / "etcd")
    with pytest.raises(DevenvError) as failed:
        KubeApiServer(etcd=etcd, data_dir=tmp_path / "apiserver").start()
    log = tmp_path / "cache" / "kube-apiserver-v1.34.2" / "build.log"
    assert failed.value.message == f"go build of kube-apiserver failed (exit 1); see {log}"
    assert "reading proxy: 403 Forbidden" in failed.value.full_text()
    assert not etcd.running
