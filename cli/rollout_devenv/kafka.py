"""A real single-node Apache Kafka broker (KRaft, broker and controller in one JVM), no Docker.

The jars come from Maven Central through `deploy/kafka/pom.xml` and are kept under
`~/.cache/rollout/kafka-<version>/`, so a machine fetches them once per version.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollout_devenv._java import find_java, find_maven, java_home
from rollout_devenv._proc import (
    LOOPBACK,
    DevenvError,
    free_port,
    log_tail,
    port_open,
    spawn,
    stop_process,
)
from rollout_devenv._server import LocalServer
from rollout_devenv.tls import TlsFiles

REPO_ROOT = Path(__file__).resolve().parents[2]
KAFKA_DEPLOY_DIR = REPO_ROOT / "deploy" / "kafka"
POM = KAFKA_DEPLOY_DIR / "pom.xml"
LOG4J_CONFIG = KAFKA_DEPLOY_DIR / "log4j2.properties"
# Pinned so a fetch does the same thing on every machine, whatever Maven would pick as latest.
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
FETCH_TIMEOUT_S = 900.0
_HEARTBEAT_S = 10.0
_MARKER = ".complete"
_POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}
DEFAULT_START_TIMEOUT_S = 120.0


def cache_root() -> Path:
    """Where fetched and built infrastructure is kept: `ROLLOUT_CACHE_DIR`, else ~/.cache/rollout
    (a CI cache can point it at a kept folder)."""
    return Path(os.environ.get("ROLLOUT_CACHE_DIR") or Path.home() / ".cache" / "rollout")


def _require(path: Path) -> Path:
    if not path.is_file():
        raise DevenvError(f"{path.name} not found at {path}; rollout_devenv runs from a source checkout")
    return path


def kafka_version(pom: Path = POM) -> str:
    """The Kafka version the pom pins: the single place it is written down."""
    try:
        root = ET.parse(_require(pom)).getroot()
    except ET.ParseError as exc:
        raise DevenvError(f"cannot read {pom}: {exc}") from exc
    version = root.findtext("m:properties/m:kafka.version", namespaces=_POM_NS)
    if not version:
        raise DevenvError(f"{pom} sets no <kafka.version> property")
    return version.strip()


def kafka_home(version: str) -> Path:
    return cache_root() / f"kafka-{version}"


def _pom_digest(pom: Path) -> str:
    # The marker records which pom filled the folder, so a changed pom (say a newer log4j under
    # the same Kafka version) is fetched again instead of trusted.
    return hashlib.sha256(pom.read_bytes()).hexdigest()


def _complete(home: Path, digest: str) -> bool:
    marker = home / _MARKER
    return marker.is_file() and marker.read_text().strip() == digest


def _say(text: str, *, quiet: bool) -> None:
    # Looked up at each call, not bound at import, so it follows whatever sys.stderr is now.
    if not quiet:
        print(f"rollout_devenv: {text}", file=sys.stderr, flush=True)


def _run_maven(*, pom: Path, out_dir: Path, log_path: Path, quiet: bool) -> None:
    java = find_java()
    cmd = [
        str(find_maven()),
        "-B",
        "-q",
        "-Dstyle.color=never",
        "-f",
        str(pom),
        f"{DEPENDENCY_PLUGIN}:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={out_dir}",
    ]
    # Maven itself runs on the same Java as the broker, not on whatever newer JDK JAVA_HOME names.
    env = {**os.environ, "JAVA_HOME": str(java_home(java))}
    proc = spawn(cmd, log_path=log_path, cwd=pom.parent, env=env)
    try:
        _await_maven(proc, log_path=log_path, quiet=quiet)
    finally:
        # Maven runs in its own session, so a Ctrl-C here does not reach it: end it ourselves.
        stop_process(proc, grace_s=2.0)


def _await_maven(proc: subprocess.Popen[bytes], *, log_path: Path, quiet: bool) -> None:
    started = time.monotonic()
    while True:
        try:
            code = proc.wait(timeout=_HEARTBEAT_S)
            break
        except subprocess.TimeoutExpired:
            elapsed = time.monotonic() - started
            if elapsed > FETCH_TIMEOUT_S:
                raise DevenvError(
                    f"fetching the Kafka jars took over {FETCH_TIMEOUT_S:.0f} s; see {log_path}"
                ) from None
            _say(f"... still fetching ({elapsed:.0f} s)", quiet=quiet)
    if code != 0:
        cause = _first_maven_error(log_path)
        raise DevenvError(
            f"Maven failed to fetch the Kafka jars (exit {code}): {cause}; see {log_path}",
            detail=log_tail(log_path),
        )


def _first_maven_error(log_path: Path) -> str:
    # Maven's first [ERROR] line names the cause (an artifact it could not resolve, no network).
    for line in log_path.read_text(errors="replace").splitlines():
        # Maven colours its output even in batch mode; the escape codes would garble the message.
        _, marker, cause = re.sub(r"\x1b\[[0-9;]*m", "", line).partition("[ERROR]")
        if marker and cause.strip():
            return cause.strip()[:300]
    return "no [ERROR] line in its output"


def fetch_kafka_jars(*, pom: Path = POM, quiet: bool = False) -> Path:
    """The folder of the broker's jars, fetched with Maven unless this machine has them already."""
    version = kafka_version(pom)
    home = kafka_home(version)
    jars = home / "libs"
    digest = _pom_digest(pom)
    if _complete(home, digest):
        return jars
    home.mkdir(parents=True, exist_ok=True)
    # One fetch at a time per version: parallel test sessions wait for the first one's jars.
    with (home / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _complete(home, digest):
            return jars
        _say(f"fetching the Kafka {version} jars with Maven into {home} (once per machine)...", quiet=quiet)
        started = time.monotonic()
        staging = Path(tempfile.mkdtemp(prefix="libs-", dir=home))
        try:
            _run_maven(pom=pom, out_dir=staging, log_path=home / "fetch.log", quiet=quiet)
            if not (staging / f"kafka_2.13-{version}.jar").is_file():
                raise DevenvError(f"Maven finished but kafka_2.13-{version}.jar is missing from {staging}")
            shutil.rmtree(jars, ignore_errors=True)
            staging.rename(jars)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        (home / _MARKER).write_text(digest + "\n")
        count = len(list(jars.glob("*.jar")))
        _say(f"fetched {count} jars in {time.monotonic() - started:.1f} s", quiet=quiet)
    return jars


@dataclass(frozen=True, slots=True)
class BrokerPorts:
    broker: int
    controller: int


def _new_ports() -> BrokerPorts:
    broker = free_port()
    controller = free_port()
    while controller == broker:
        controller = free_port()
    return BrokerPorts(broker=broker, controller=controller)


def _ports_in(props: Path) -> BrokerPorts | None:
    """The ports an earlier run wrote into `props`, so a data dir keeps its address across runs."""
    if not props.is_file():
        return None
    text = props.read_text()
    # Matches the SASL_PLAINTEXT listener of a secured broker and the SSL one of a TLS broker too.
    broker = re.search(r"(?:PLAINTEXT|SSL)://[^:,\s]+:(\d+)", text)
    controller = re.search(r"CONTROLLER://[^:,\s]+:(\d+)", text)
    if not (broker and controller):
        return None
    return BrokerPorts(broker=int(broker.group(1)), controller=int(controller.group(1)))


def server_properties(*, ports: BrokerPorts, log_dir: Path) -> dict[str, str]:
    """A one-node cluster: every replication factor and min ISR is 1, and nothing waits."""
    return {
        "process.roles": "broker,controller",
        "node.id": "1",
        # A static voter set lets `StorageTool format` run without a quorum flag.
        "controller.quorum.voters": f"1@{LOOPBACK}:{ports.controller}",
        "listeners": f"PLAINTEXT://{LOOPBACK}:{ports.broker},CONTROLLER://{LOOPBACK}:{ports.controller}",
        "advertised.listeners": f"PLAINTEXT://{LOOPBACK}:{ports.broker}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(log_dir),
        "num.partitions": "1",
        "auto.create.topics.enable": "true",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        # Tests join fresh groups all the time; the default 3 s delay would be paid on each.
        "group.initial.rebalance.delay.ms": "0",
        # The default 128 MiB cleaner buffer is a lot of heap for a 512 MiB test broker.
        "log.cleaner.dedupe.buffer.size": "33554432",
        "num.network.threads": "2",
        "num.io.threads": "2",
    }


SCRAM_MECHANISM = "SCRAM-SHA-512"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_SCRAM_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")


def _check_scram_user(name: str, password: str) -> None:
    # Both end up inside `--add-scram 'SCRAM-SHA-512=[name=...,password=...]'` and a JAAS line, whose
    # quoting is not worth getting right for test users: plain names, no quotes or separators.
    if not _SCRAM_NAME.fullmatch(name):
        raise DevenvError(f"SASL user name {name!r} must match {_SCRAM_NAME.pattern}")
    if not password or any(c in password for c in '"\\,[]=;\n') or password != password.strip():
        raise DevenvError(f'the password of SASL user {name!r} is empty or holds one of: " \\ , [ ] = ; blank')


def secured_properties(*, ports: BrokerPorts, log_dir: Path, super_user: str, super_password: str) -> dict[str, str]:
    """`server_properties` with one SASL_PLAINTEXT listener (SCRAM-SHA-512) and the StandardAuthorizer.

    Every client, the broker itself included (inter-broker listener), authenticates with SCRAM on the
    SASL_PLAINTEXT listener; `super_user` is the broker's own identity and a super user. The
    CONTROLLER listener stays PLAINTEXT on loopback: in this one-node KRaft cluster only the broker
    half of the same JVM talks to it, as `User:ANONYMOUS`, which is therefore also a super user.
    Nothing but `super.users` is allowed without an ACL (`allow.everyone.if.no.acl.found=false`).
    """
    props = server_properties(ports=ports, log_dir=log_dir)
    props.update(_scram_listener_properties(ports=ports, super_user=super_user, super_password=super_password))
    props.update(_acl_properties(super_user=super_user))
    return props


def _scram_listener_properties(*, ports: BrokerPorts, super_user: str, super_password: str) -> dict[str, str]:
    """The SASL_PLAINTEXT listener for clients and the broker itself, the broker logging in as `super_user`."""
    listener = "sasl_plaintext"
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{super_user}" password="{super_password}";'
    )
    return {
        "listeners": f"SASL_PLAINTEXT://{LOOPBACK}:{ports.broker},CONTROLLER://{LOOPBACK}:{ports.controller}",
        "advertised.listeners": f"SASL_PLAINTEXT://{LOOPBACK}:{ports.broker}",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": SCRAM_MECHANISM,
        "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
        f"listener.name.{listener}.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": jaas,
    }


def _acl_properties(*, super_user: str) -> dict[str, str]:
    """The StandardAuthorizer: nothing without an ACL but the super users."""
    return {
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": f"User:{super_user};User:ANONYMOUS",
        "allow.everyone.if.no.acl.found": "false",
        # Secured brokers are for ACL tests: a produce to a missing topic must fail, not create it.
        "auto.create.topics.enable": "false",
    }


def tls_properties(*, ports: BrokerPorts, log_dir: Path, tls: TlsFiles) -> dict[str, str]:
    """`server_properties` with the client listener on TLS (the broker's own traffic too); the
    CONTROLLER listener stays PLAINTEXT on loopback, inside the one JVM."""
    props = server_properties(ports=ports, log_dir=log_dir)
    props.update(
        {
            "listeners": f"SSL://{LOOPBACK}:{ports.broker},CONTROLLER://{LOOPBACK}:{ports.controller}",
            "advertised.listeners": f"SSL://{LOOPBACK}:{ports.broker}",
            "listener.security.protocol.map": "SSL:SSL,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "SSL",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(tls.keystore),
            "ssl.keystore.password": tls.keystore_password,
            "ssl.key.password": tls.keystore_password,
            # The broker reaches itself as a client on this listener: it trusts its own certificate.
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(tls.cert),
            "ssl.client.auth": "none",
        }
    )
    return props


def sasl_client_settings(user: str, password: str) -> dict[str, Any]:
    """aiokafka keyword arguments (also `KafkaBus(security=...)`) to log in as `user`."""
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": SCRAM_MECHANISM,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }


def _write_properties(path: Path, props: dict[str, str]) -> None:
    lines = [f"{key}={value}" for key, value in props.items()]
    path.write_text("# Written by rollout_devenv at each start.\n" + "\n".join(lines) + "\n")


def new_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes in URL-safe base64 without padding."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        # Kafka refuses ids that start with "-": they read like command-line flags.
        if not cluster_id.startswith("-"):
            return cluster_id


class KafkaBroker(LocalServer[BrokerPorts]):
    """One broker process on loopback, with its data in `data_dir`.

    Restarting it (`restart()`, or `stop()` then `start()`) keeps the data dir and the ports, so
    clients reconnect to the same bootstrap address and find what was written before.

    With `sasl_users` ({name: password}) the broker is secured instead: a SASL_PLAINTEXT listener
    taking SCRAM-SHA-512 logins, the StandardAuthorizer, `super_user` (one of `sasl_users`) as the
    only principal allowed anything without an ACL. The SCRAM credentials are written into the
    metadata log when the data dir is formatted (`kafka-storage format --add-scram`), so they
    exist before the first client connects; users added later need a fresh data dir.
    `client_settings(name)` gives the aiokafka arguments to log in as one of them.

    With `tls` (see `rollout_devenv.tls`) the client listener speaks TLS instead (no SASL), and
    `client_settings()` gives the aiokafka arguments that check the broker against `tls.cert`.
    """

    subject = "the Kafka broker"
    # A single test broker holds every partition; a member of a local cluster gets less (kafka_cluster).
    heap: tuple[str, ...] = ("-Xms256m", "-Xmx512m")

    def __init__(
        self,
        *,
        data_dir: Path | None = None,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        sasl_users: Mapping[str, str] | None = None,
        super_user: str = "admin",
        tls: TlsFiles | None = None,
    ) -> None:
        if tls is not None and sasl_users:
            raise DevenvError("a local broker is either secured with SASL users or served over TLS, not both")
        self.tls = tls
        self.sasl_users = dict(sasl_users or {})
        self.super_user = super_user
        if self.sasl_users:
            for name, password in self.sasl_users.items():
                _check_scram_user(name, password)
            if super_user not in self.sasl_users:
                raise DevenvError(f"super_user {super_user!r} is not one of sasl_users {sorted(self.sasl_users)}")
        super().__init__(
            data_dir=data_dir, prefix="rollout-kafka-", log_name="kafka.log", start_timeout_s=start_timeout_s
        )
        self.version = kafka_version()
        self.title = f"Kafka {self.version}"
        self.last_start_s: float | None = None

    def __repr__(self) -> str:
        # Never the passwords: a repr ends up in test reports and logs.
        secured = f", sasl_users={sorted(self.sasl_users)}" if self.secured else ""
        return f"KafkaBroker(version={self.version!r}, data_dir={str(self.data_dir)!r}{secured}, {self._state})"

    @property
    def secured(self) -> bool:
        return bool(self.sasl_users)

    def client_settings(self, user: str | None = None) -> dict[str, Any]:
        """aiokafka keyword arguments to log in as `user` (default: the super user); none for a plain broker."""
        if self.tls is not None:
            return {"security_protocol": "SSL", "ssl_context": ssl.create_default_context(cafile=str(self.tls.cert))}
        if not self.secured:
            return {}
        name = user or self.super_user
        if name not in self.sasl_users:
            raise DevenvError(f"{name!r} is not one of this broker's sasl_users {sorted(self.sasl_users)}")
        return sasl_client_settings(name, self.sasl_users[name])

    @property
    def ports(self) -> BrokerPorts:
        return self._started_ports

    def _new_ports(self) -> BrokerPorts:
        # The ports an earlier run wrote into the data dir, so it keeps its address across runs.
        return _ports_in(self._props_path) or _new_ports()

    @property
    def bootstrap(self) -> str:
        """`host:port` of the client listener (PLAINTEXT, or SASL_PLAINTEXT when secured)."""
        return f"{LOOPBACK}:{self.ports.broker}"

    @property
    def _props_path(self) -> Path:
        return self.data_dir / "server.properties"

    @property
    def _log_dir(self) -> Path:
        return self.data_dir / "kraft-logs"

    def _jvm(self, *, java: Path, jars: Path, heap: list[str]) -> list[str]:
        return [
            str(java),
            *heap,
            f"-Dlog4j2.configurationFile={_require(LOG4J_CONFIG).as_uri()}",
            "-cp",
            f"{jars}/*",
        ]

    def _format(self, *, java: Path, jars: Path) -> None:
        """Give a fresh log dir its cluster id; a formatted one (a restart) is left as it is."""
        if (self._log_dir / "meta.properties").is_file():
            return
        cmd = [
            *self._jvm(java=java, jars=jars, heap=["-Xmx256m"]),
            "kafka.tools.StorageTool",
            "format",
            "-t",
            self._cluster_id(),
            "-c",
            str(self._props_path),
        ]
        for name, password in self.sasl_users.items():
            cmd += ["--add-scram", f"{SCRAM_MECHANISM}=[name={name},password={password}]"]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        except subprocess.TimeoutExpired as exc:
            raise DevenvError("formatting the Kafka log dir took over 120 s") from exc
        if done.returncode != 0:
            output = (done.stdout + done.stderr).strip()
            for password in self.sasl_users.values():
                output = output.replace(password, "***")
            raise DevenvError(f"formatting the Kafka log dir failed (exit {done.returncode})", detail=output)

    def _cluster_id(self) -> str:
        """The id a fresh log dir is formatted with: a new one for a broker of its own."""
        return new_cluster_id()

    def _start_once(self) -> None:
        """Start the broker and return once a consumer group can join and commit on it."""
        started = time.monotonic()
        jars = fetch_kafka_jars()
        java = find_java()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        _write_properties(self._props_path, self._properties(self._choose_ports()))
        self._format(java=java, jars=jars)
        cmd = [
            *self._jvm(java=java, jars=jars, heap=list(self.heap)),
            "kafka.Kafka",
            str(self._props_path),
        ]
        self._spawn(cmd)
        self._wait_ready()
        self.last_start_s = time.monotonic() - started

    def _properties(self, ports: BrokerPorts) -> dict[str, str]:
        if self.tls is not None:
            return tls_properties(ports=ports, log_dir=self._log_dir, tls=self.tls)
        if not self.secured:
            return server_properties(ports=ports, log_dir=self._log_dir)
        return secured_properties(
            ports=ports,
            log_dir=self._log_dir,
            super_user=self.super_user,
            super_password=self.sasl_users[self.super_user],
        )

    def _wait_ready(self) -> None:
        # Imported here: aiokafka is only needed once a broker runs, not to fetch jars.
        from rollout_devenv._probe import broker_ready

        deadline = time.monotonic() + self.start_timeout_s
        port = self.ports.broker
        self._await(lambda: port_open(port), why_not="its port never opened")
        reason = ""
        while time.monotonic() < deadline:
            if not self.running:
                self._fail_start("")
            ready, reason = broker_ready(self.bootstrap, self.client_settings())
            if ready:
                return
            time.sleep(0.5)
        self._fail_start(f"it was not ready after {self.start_timeout_s:.0f} s ({reason})")
