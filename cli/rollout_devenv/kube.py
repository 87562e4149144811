"""A real Kubernetes API server (upstream kube-apiserver on Debian's etcd), no Docker.

kube-apiserver is built with Go from the Kubernetes sources on the Go module proxy, through the
small main package in `deploy/kube-apiserver/`, once per machine per version, into
`~/.cache/rollout/kube-apiserver-<version>/` (next to the Kafka jars). Several apiservers can
share one etcd, each under its own key prefix: a management cluster and workload clusters.

Nothing runs controllers or kubelets: objects and their `status` change only when a client
writes them, so a test's simulated world moves `status` itself.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from rollout_devenv._proc import LOOPBACK, DevenvError, free_port, log_tail, spawn, stop_process, stop_processes
from rollout_devenv._server import LocalServer, OnePortServer
from rollout_devenv.build_lock import start_detached_build, took
from rollout_devenv.kafka import cache_root
from rollout_devenv.tls import _openssl

REPO_ROOT = Path(__file__).resolve().parents[2]
KUBE_DEPLOY_DIR = REPO_ROOT / "deploy" / "kube-apiserver"
GO_MOD = KUBE_DEPLOY_DIR / "go.mod"
# Our own minimal Fleet CRDs: Fleet's Go module is not reachable, and we read few fields.
FLEET_CRDS = KUBE_DEPLOY_DIR / "crds" / "fleet.yaml"
# The Cluster API release whose CRDs the tests install; its module comes from the Go proxy.
CLUSTER_API_MODULE = "sigs.k8s.io/cluster-api"
CLUSTER_API_VERSION = "v1.10.4"
CLUSTER_API_CRDS = (
    "config/crd/bases/cluster.x-k8s.io_clusters.yaml",
    "config/crd/bases/cluster.x-k8s.io_clusterclasses.yaml",
    "config/crd/bases/cluster.x-k8s.io_machinedeployments.yaml",
    "config/crd/bases/cluster.x-k8s.io_machinesets.yaml",
    "config/crd/bases/cluster.x-k8s.io_machines.yaml",
    "controlplane/kubeadm/config/crd/bases/controlplane.cluster.x-k8s.io_kubeadmcontrolplanes.yaml",
)
BUILD_TIMEOUT_S = 3600.0
_HEARTBEAT_S = 30.0
_LOCK_POLL_S = 2.0
# The pid of the running `go build`, whose process group a waiter raises to normal priority.
_BUILDER_PID = "build.pid"
_MARKER = ".complete"
_FAILED = ".failed"
DEFAULT_START_TIMEOUT_S = 90.0
ADMIN_USER = "rollout-admin"


def kube_version(go_mod: Path = GO_MOD) -> str:
    """The Kubernetes version `deploy/kube-apiserver/go.mod` requires: the one place it is pinned."""
    if not go_mod.is_file():
        raise DevenvError(f"{go_mod} not found; rollout_devenv runs from a source checkout")
    found = re.search(r"^\s*(?:require\s+)?k8s\.io/kubernetes\s+(v[0-9][^\s]*)", go_mod.read_text(), re.MULTILINE)
    if found is None:
        raise DevenvError(f"{go_mod} requires no k8s.io/kubernetes version")
    return found.group(1)


def apiserver_home(version: str) -> Path:
    return cache_root() / f"kube-apiserver-{version}"


def _sources_digest() -> str:
    # The marker records which sources built the binary, so a changed go.mod is built again.
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum", "main.go"):
        digest.update((KUBE_DEPLOY_DIR / name).read_bytes())
    return digest.hexdigest()


def _say(text: str, *, quiet: bool) -> None:
    if not quiet:
        print(f"rollout_devenv: {text}", file=sys.stderr, flush=True)


def find_go() -> Path:
    found = shutil.which("go") or next((p for p in ("/usr/local/go/bin/go",) if Path(p).is_file()), None)
    if found is None:
        raise DevenvError("go not found on PATH; building kube-apiserver needs Go 1.24 or newer")
    return Path(found)


def _ldflags(version: str) -> str:
    major, minor = version.lstrip("v").split(".")[:2]
    pkg = "k8s.io/component-base/version"
    # Without these /version reports v0.0.0-master; stripped symbols save a third of the size.
    return f"-s -w -X {pkg}.gitVersion={version} -X {pkg}.gitMajor={major} -X {pkg}.gitMinor={minor}"


def _is_built(home: Path, digest: str) -> bool:
    marker = home / _MARKER
    return (home / "kube-apiserver").is_file() and marker.is_file() and marker.read_text().strip() == digest


def build_kube_apiserver(*, quiet: bool = False, wait_s: float | None = None) -> Path:
    """The kube-apiserver binary, built with Go unless this machine has it already (slow: about
    13 minutes on one core, at the lowest CPU priority so a shared machine stays usable).

    Only one build runs per version: a caller that finds another one under way (`make test`
    starts one in the background) waits for it, up to `wait_s`, and raises it to normal CPU
    priority, since nothing else is asked of the machine while a test waits for its apiserver.
    """
    version = kube_version()
    home = apiserver_home(version)
    binary = home / "kube-apiserver"
    digest = _sources_digest()
    if _is_built(home, digest):
        return binary
    home.mkdir(parents=True, exist_ok=True)
    with (home / ".lock").open("w") as lock:
        waited = _lock_build(lock, home=home, quiet=quiet, wait_s=BUILD_TIMEOUT_S if wait_s is None else wait_s)
        if _is_built(home, digest):
            return binary
        failed = home / _FAILED
        if waited and failed.is_file() and failed.read_text().strip() == digest:
            # The same sources would fail the same way: say so now rather than after another build.
            why = f"the kube-apiserver build this waited for failed; see {home / 'build.log'}"
            raise DevenvError(why, detail=log_tail(home / "build.log"))
        _run_build(home, version=version, digest=digest, quiet=quiet)
    return binary


def _run_build(home: Path, *, version: str, digest: str, quiet: bool) -> None:
    _say(f"building kube-apiserver {version} with Go into {home} (once per machine, ~15 min)...", quiet=quiet)
    started = time.monotonic()
    partial = home / "kube-apiserver.partial"
    log_path = home / "build.log"
    (home / _FAILED).unlink(missing_ok=True)
    cmd = ["nice", "-n", "19", str(find_go()), "build", "-trimpath", "-ldflags", _ldflags(version)]
    cmd += ["-o", str(partial), "."]
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
    proc = spawn(cmd, log_path=log_path, cwd=KUBE_DEPLOY_DIR, env=env)
    # Whoever waits for this build finds the process group to raise here.
    (home / _BUILDER_PID).write_text(f"{proc.pid}\n")
    try:
        _await_build(proc, log_path=log_path, started=started, quiet=quiet)
    except DevenvError:
        # Which sources failed: a waiter for this build gives up, one for newer sources builds them.
        (home / _FAILED).write_text(digest + "\n")
        raise
    finally:
        stop_process(proc, grace_s=2.0)
        (home / _BUILDER_PID).unlink(missing_ok=True)
    partial.rename(home / "kube-apiserver")
    (home / _MARKER).write_text(digest + "\n")
    _say(f"built kube-apiserver in {time.monotonic() - started:.0f} s", quiet=quiet)


def _lock_build(lock: IO[str], *, home: Path, quiet: bool, wait_s: float) -> bool:
    """Take the build lock, waiting at most `wait_s` for a build another process is running;
    True when there was one to wait for."""
    if took(lock):
        return False
    started = time.monotonic()
    _say(f"waiting for the kube-apiserver build under way (log: {home / 'build.log'})", quiet=quiet)
    said = started
    while True:
        _hurry_build(home)
        if took(lock):
            return True
        now = time.monotonic()
        if now - started > wait_s:
            raise DevenvError(
                f"the kube-apiserver build under way did not finish within {wait_s:.0f} s; see {home / 'build.log'}",
                detail=log_tail(home / "build.log"),
            )
        if now - said >= _HEARTBEAT_S:
            said = now
            _say(f"... still waiting for the kube-apiserver build ({now - started:.0f} s)", quiet=quiet)
        time.sleep(_LOCK_POLL_S)


def _hurry_build(home: Path) -> None:
    # The build runs at nice 19 beside other work; a waiter has nothing else to do, so the compiler
    # processes (the `go` command's group, and the ones it starts later) may have the CPU. Lowering
    # a niceness needs root (CAP_SYS_NICE): without it the build just keeps its pace.
    try:
        pid = int((home / _BUILDER_PID).read_text())
        os.setpriority(os.PRIO_PGRP, os.getpgid(pid), 0)
    except (OSError, ValueError):
        pass


def start_background_build() -> str:
    """Start building kube-apiserver in a detached process unless it is built or being built, so
    the build overlaps the tests that do not need it (`make test`); returns what it did."""
    version = kube_version()
    home = apiserver_home(version)
    if _is_built(home, _sources_digest()):
        return f"kube-apiserver {version} is built: {home / 'kube-apiserver'}"
    if not start_detached_build(home, command="kube", what="kube-apiserver"):
        return f"kube-apiserver {version} is being built (log: {home / 'build.log'})"
    return (
        f"building kube-apiserver {version} in the background (log: {home / 'build.log'}); "
        "the Kubernetes tests, which run last, wait for it"
    )


def _await_build(proc: subprocess.Popen[bytes], *, log_path: Path, started: float, quiet: bool) -> None:
    while True:
        try:
            code = proc.wait(timeout=_HEARTBEAT_S)
            break
        except subprocess.TimeoutExpired:
            elapsed = time.monotonic() - started
            if elapsed > BUILD_TIMEOUT_S:
                why = f"building kube-apiserver took over {BUILD_TIMEOUT_S:.0f} s; see {log_path}"
                raise DevenvError(why) from None
            _say(f"... still building kube-apiserver ({elapsed:.0f} s)", quiet=quiet)
    if code != 0:
        raise DevenvError(f"go build of kube-apiserver failed (exit {code}); see {log_path}", detail=log_tail(log_path))


def kube_apiserver_binary() -> Path:
    """The built binary: waits for a build under way, or builds it now (a missing Go or a failed
    build raises DevenvError, so the tests that need it fail, never skip)."""
    return build_kube_apiserver()


def cluster_api_crds() -> list[Path]:
    """The Cluster API CRD files, from the module `go mod download` puts in the Go module cache."""
    module = f"{CLUSTER_API_MODULE}@{CLUSTER_API_VERSION}"
    done = subprocess.run(
        [str(find_go()), "mod", "download", "-json", module],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=tempfile.gettempdir(),
        env={**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"},
    )
    if done.returncode != 0:
        raise DevenvError(f"go mod download {module} failed (exit {done.returncode})", detail=done.stderr.strip())
    folder = Path(json.loads(done.stdout)["Dir"])
    return [folder / name for name in CLUSTER_API_CRDS]


def find_etcd() -> Path:
    found = shutil.which("etcd")
    if found is None:
        raise DevenvError("etcd not found on PATH; install it (apt-get install etcd-server)")
    return Path(found)


def _get(url: str, *, token: str | None = None, context: ssl.SSLContext | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=2.0, context=context) as answer:
            return int(answer.status), answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""
    except (OSError, ValueError):
        return 0, b""


class EtcdServer(LocalServer[tuple[int, int]]):
    """Debian's etcd on loopback ports, its data in `data_dir`; the store of the apiservers."""

    title = "etcd"
    subject = "etcd"
    # Chosen ports of etcd have been lost to other processes on a loaded machine: it tries new ones.
    port_attempts = 3

    def __init__(self, *, data_dir: Path | None = None, start_timeout_s: float = 30.0) -> None:
        super().__init__(
            data_dir=data_dir, prefix="rollout-etcd-", log_name="etcd.log", start_timeout_s=start_timeout_s
        )

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self._started_ports[0]}"

    def _new_ports(self) -> tuple[int, int]:
        return free_port(), free_port()

    def _release_ports(self) -> None:
        super()._release_ports()
        shutil.rmtree(self.data_dir / "data", ignore_errors=True)  # bootstrapped with the old ports

    def _start_once(self) -> None:
        binary = find_etcd()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        client, peer = self._choose_ports()
        cmd = [
            str(binary),
            "--name", "rollout-local",
            "--data-dir", str(self.data_dir / "data"),
            "--listen-client-urls", f"http://{LOOPBACK}:{client}",
            "--advertise-client-urls", f"http://{LOOPBACK}:{client}",
            "--listen-peer-urls", f"http://{LOOPBACK}:{peer}",
            "--initial-advertise-peer-urls", f"http://{LOOPBACK}:{peer}",
            "--initial-cluster", f"rollout-local=http://{LOOPBACK}:{peer}",
            # A test store: losing the last writes on a crash does not matter, speed does.
            "--unsafe-no-fsync",
        ]  # fmt: skip
        self._spawn(cmd)
        url = self.url

        def healthy() -> bool:
            status, body = _get(f"{url}/health")
            return status == 200 and b'"true"' in body

        self._await(healthy, why_not="/health never said true")


@dataclass(frozen=True, slots=True)
class KubeUser:
    """A user of the static token file: RBAC decides what it may do (admins are system:masters)."""

    name: str
    token: str
    groups: tuple[str, ...] = ()


class KubeApiServer(OnePortServer):
    """One kube-apiserver on a loopback port, storing under `etcd_prefix` in `etcd`.

    It authenticates bearer tokens from a static file (an admin in `system:masters`, plus any
    `users` given) and authorizes with RBAC. `kubeconfig` is a file for the admin;
    `kubeconfig_for(user)` writes one for another user. Clients check the server's generated
    certificate against its own CA (`ca_data`).
    """

    title = "kube-apiserver"
    subject = "the apiserver"

    def __init__(
        self,
        *,
        etcd: EtcdServer,
        etcd_prefix: str = "/registry",
        data_dir: Path | None = None,
        users: Sequence[KubeUser] = (),
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        name: str = "local",
    ) -> None:
        self.etcd = etcd
        self.etcd_prefix = etcd_prefix
        self.name = name
        super().__init__(
            data_dir=data_dir, prefix="rollout-kube-", log_name="kube-apiserver.log", start_timeout_s=start_timeout_s
        )
        self.admin = KubeUser(name=ADMIN_USER, token=secrets.token_hex(16), groups=("system:masters",))
        self.users = tuple(users)
        self.last_start_s: float | None = None

    def __repr__(self) -> str:
        return f"KubeApiServer(name={self.name!r}, prefix={self.etcd_prefix!r}, {self._state})"

    @property
    def url(self) -> str:
        return f"https://{LOOPBACK}:{self.port}"

    @property
    def kubeconfig(self) -> Path:
        return self.data_dir / "kubeconfig"

    @property
    def ca_data(self) -> bytes:
        # The generated serving certificate file holds the certificate and its self-made CA.
        return (self.data_dir / "certs" / "apiserver.crt").read_bytes()

    def _keys(self) -> tuple[Path, Path]:
        key, pub = self.data_dir / "sa.key", self.data_dir / "sa.pub"
        if not key.is_file():
            _openssl("genrsa", "-out", str(key), "2048")
            _openssl("rsa", "-in", str(key), "-pubout", "-out", str(pub))
        return key, pub

    def _token_file(self) -> Path:
        path = self.data_dir / "tokens.csv"
        path.touch(mode=0o600)
        lines = []
        for index, user in enumerate((self.admin, *self.users)):
            groups = ",".join(user.groups)
            lines.append(f'{user.token},{user.name},uid-{index},"{groups}"')
        path.write_text("\n".join(lines) + "\n")
        return path

    def _command(self, binary: Path) -> list[str]:
        key, pub = self._keys()
        return [
            str(binary),
            f"--etcd-servers={self.etcd.url}",
            f"--etcd-prefix={self.etcd_prefix}",
            f"--bind-address={LOOPBACK}",
            f"--advertise-address={LOOPBACK}",
            f"--secure-port={self.port}",
            f"--cert-dir={self.data_dir / 'certs'}",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={pub}",
            f"--service-account-signing-key-file={key}",
            f"--token-auth-file={self._token_file()}",
            "--authorization-mode=RBAC",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--disable-admission-plugins=ServiceAccount",
            # Fewer moving parts on a small shared machine; none of these serve the tests.
            "--enable-priority-and-fairness=false",
            "--profiling=false",
        ]

    def _start_once(self) -> None:
        """Start the apiserver and return once `/readyz` answers 200 to the admin."""
        binary = kube_apiserver_binary()
        if not self.etcd.running:
            raise DevenvError("start etcd before the apiserver")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._choose_ports()
        started = time.monotonic()
        self._spawn(self._command(binary))
        insecure = ssl.create_default_context()
        # Only until the certificate exists: the readiness probe, never a client.
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        url, token = self.url, self.admin.token

        def ready() -> bool:
            return _get(f"{url}/readyz", token=token, context=insecure)[0] == 200

        self._await(ready, why_not="/readyz never said ok", interval_s=0.5)
        self.last_start_s = time.monotonic() - started
        self.kubeconfig_for(self.admin, path=self.kubeconfig)

    def kubeconfig_for(self, user: KubeUser, *, path: Path | None = None) -> Path:
        """Write a kubeconfig for `user` (one of `users`, or the admin) and return its path."""
        path = path or self.data_dir / f"kubeconfig-{user.name}"
        path.touch(mode=0o600)
        path.write_text(kubeconfig_text(name=self.name, server=self.url, ca_data=self.ca_data, user=user))
        return path


def kubeconfig_text(*, name: str, server: str, ca_data: bytes, user: KubeUser) -> str:
    """A one-context kubeconfig (JSON is YAML, and needs no YAML library here)."""
    config: Mapping[str, object] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": name,
                "cluster": {"server": server, "certificate-authority-data": base64.b64encode(ca_data).decode()},
            }
        ],
        "users": [{"name": user.name, "user": {"token": user.token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": user.name}}],
        "current-context": name,
    }
    return json.dumps(config, indent=2) + "\n"


def fleet_crds() -> list[Path]:
    return [FLEET_CRDS]


def install_crds(kubeconfig: Path, files: Sequence[Path], *, timeout_s: float = 60.0) -> list[str]:
    """Apply the CRDs in `files` (server-side apply) and wait until each is Established.

    Returns the CRD names. lightkube is imported here: the rest of this module needs no client.
    """
    from lightkube import Client, KubeConfig, codecs
    from lightkube.resources.apiextensions_v1 import CustomResourceDefinition

    client = Client(KubeConfig.from_file(str(kubeconfig)), field_manager="rollout-devenv")
    names: list[str] = []
    try:
        for path in files:
            with path.open() as stream:
                for obj in codecs.load_all_yaml(stream):
                    client.apply(obj, force=True)
                    assert obj.metadata is not None and obj.metadata.name is not None
                    names.append(obj.metadata.name)
        deadline = time.monotonic() + timeout_s
        for name in names:
            while True:
                crd = client.get(CustomResourceDefinition, name)
                conditions = (crd.status.conditions if crd.status else None) or []
                if any(c.type == "Established" and c.status == "True" for c in conditions):
                    break
                if time.monotonic() > deadline:
                    raise DevenvError(f"CRD {name} was not established within {timeout_s:.0f} s")
                time.sleep(0.2)
    finally:
        client.close()
    return names


class KubeStack:
    """etcd and `count` apiservers on it (the first is the management cluster), with the
    Cluster API and Fleet CRDs installed in the first one; stops them all in `stop`."""

    def __init__(self, *, count: int = 1, users: Sequence[KubeUser] = (), crds: bool = True) -> None:
        if count < 1:
            raise DevenvError("a stack needs at least one apiserver")
        self.etcd = EtcdServer()
        self.apiservers = [
            KubeApiServer(etcd=self.etcd, etcd_prefix=f"/cluster-{index}", users=users, name=f"cluster-{index}")
            for index in range(count)
        ]
        self.crds = crds
        self.crd_install_s: float | None = None

    @property
    def management(self) -> KubeApiServer:
        return self.apiservers[0]

    @property
    def running(self) -> bool:
        return self.etcd.running and all(server.running for server in self.apiservers)

    @property
    def log_path(self) -> Path:
        return self.management.log_path

    @property
    def data_dir(self) -> Path:
        return self.management.data_dir

    def start(self) -> None:
        kube_apiserver_binary()  # a build under way is waited for before etcd starts
        try:
            self.etcd.start()
            for server in self.apiservers:
                server.start()
            if self.crds:
                started = time.monotonic()
                install_crds(self.management.kubeconfig, [*cluster_api_crds(), *fleet_crds()])
                self.crd_install_s = time.monotonic() - started
        except BaseException:
            self.stop(remove_data=True)
            raise

    def stop(self, *, remove_data: bool = False) -> None:
        # Side by side: each apiserver takes seconds to drain after SIGTERM (three took 33 s in turn).
        stop_processes([server._proc for server in self.apiservers if server._proc is not None])
        for server in self.apiservers:
            server.stop(remove_data=remove_data)
        self.etcd.stop(remove_data=remove_data)

    def __enter__(self) -> KubeStack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop(remove_data=True)
