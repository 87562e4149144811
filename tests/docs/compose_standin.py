"""`docker compose` for deploy/compose/compose.yaml on a machine without a Docker engine.

Each service runs as a local process made from the Compose file itself: the rollout services with
their `command` and their `environment` (anchors merged, `${VAR:-default}` filled in); Redis with
its `command`; `kafka-init` with its script, Kafka's tools coming from the broker's jars. Every
service's own `healthcheck` is what decides that it is up. Only what a container engine provides is
replaced: the Kafka container by a local broker from the same Apache release, host names
(`kafka`, `redis`) and fixed ports by local addresses, and the image by this checkout's venv.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rollout_devenv import KafkaBroker, free_port, stop_processes

_READY_TIMEOUT_S = 300.0  # generous: a loaded machine starts a broker and its tools slowly
_CHECK_TIMEOUT_S = 90.0
_VARIABLE = re.compile(r"\$\{(\w+):-([^}]*)\}")
# The port each rollout service's HTTP endpoints use inside its container.
_PORT_SETTINGS = ("ROLLOUT_HTTP_PORT", "ROLLOUT_METRICS_PORT")


class ComposeError(Exception):
    pass


@dataclass
class _Replica:
    service: str
    process: subprocess.Popen[bytes]
    env: dict[str, str]
    # container port -> port on this machine
    ports: dict[str, int]


@dataclass
class ComposeStandIn:
    compose_file: Path
    work: Path
    tools_bin: Path
    base_env: dict[str, str]
    broker: KafkaBroker | None = None
    redis_port: int = 0
    replicas: list[_Replica] = field(default_factory=list)
    _others: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.spec: dict[str, Any] = yaml.safe_load(self.compose_file.read_text(encoding="utf-8"))
        self.services: dict[str, dict[str, Any]] = self.spec["services"]

    # -- addresses -------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        assert self.broker is not None, "compose is not up"
        return self.broker.bootstrap

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"

    @property
    def redis_dir(self) -> Path:
        """Where Redis keeps its files: the `/data` volume of the redis service."""
        return self.work / "redis-data"

    def host_addresses(self) -> dict[str, str]:
        """What the page tells a person on the host to use -> where it is here."""
        addresses = {"localhost:9094": self.bootstrap, "redis://localhost:6379/0": self.redis_url}
        for service, port in (("planner", "8080"), ("executor", "9464")):
            addresses[f"localhost:{port}"] = f"localhost:{self.replica(service).ports[port]}"
        return addresses

    def _container_addresses(self, text: str) -> str:
        return text.replace("kafka:9092", self.bootstrap).replace("redis://redis:6379/0", self.redis_url)

    # -- docker compose verbs ----------------------------------------------------------------

    def up(self) -> None:
        """`up -d`: everything started, in `depends_on` order; like compose, no wait for healthchecks."""
        self.broker = KafkaBroker(data_dir=self.work / "kafka-data")
        self.broker.start()
        self._kafka_healthcheck()
        self._start_redis()
        self._run_kafka_init()
        for name, service in self.services.items():
            if "build" in service:  # the rollout services: one image, built from this repository
                self._start_replica(name)

    def scale(self, service: str, count: int) -> None:
        while len(self.replicas_of(service)) < count:
            self._start_replica(service)
        self.wait_healthy()

    def stop(self, service: str) -> None:
        """`docker compose stop SERVICE`: SIGTERM, then the stop grace period."""
        grace = float(str(self.services[service].get("stop_grace_period", "10s")).rstrip("s"))
        stop_processes([r.process for r in self.replicas_of(service)], grace_s=grace)
        self.replicas = [r for r in self.replicas if r.service != service]

    def start(self, service: str) -> None:
        self._start_replica(service)
        self.wait_healthy()

    def exec_env(self, service: str) -> dict[str, str]:
        """The environment a command run with `docker compose exec SERVICE` sees."""
        if service == "kafka":
            return dict(self.base_env)
        return dict(self.replica(service).env)

    def in_container(self, command: str) -> str:
        """A command written for a container, with the containers' addresses made local."""
        return self._container_addresses(command)

    def copy_out(self, source: str, destination: Path) -> None:
        """`docker compose cp redis:/data/FILE DEST`."""
        service, _, path = source.partition(":")
        if service != "redis" or not path.startswith("/data/"):
            raise ComposeError(f"only redis:/data/ is mapped here, not {source}")
        shutil.copyfile(self.redis_dir / path.removeprefix("/data/"), destination)

    def down(self) -> None:
        # All at once, as compose does: each gets its grace period, the waits overlap.
        stop_processes([r.process for r in self.replicas] + self._others, grace_s=30)
        if self.broker is not None:
            self.broker.stop(remove_data=True)

    # -- services ------------------------------------------------------------------------------

    def replicas_of(self, service: str) -> list[_Replica]:
        return [r for r in self.replicas if r.service == service]

    def replica(self, service: str) -> _Replica:
        found = self.replicas_of(service)
        if not found:
            raise ComposeError(f"service {service} is not running")
        return found[0]

    def log(self, service: str, index: int = 0) -> str:
        return (self.work / f"{service}-{index}.log").read_text(errors="replace")

    def environment(self, service: str) -> dict[str, str]:
        """The service's `environment`, merged and interpolated as compose does it."""
        raw = self.services[service].get("environment", {})
        return {key: _VARIABLE.sub(lambda m: os.environ.get(m[1]) or m[2], str(value)) for key, value in raw.items()}

    def _kafka_healthcheck(self) -> None:
        """The kafka service's own healthcheck, against the local broker (`kafka-init` waits for it)."""
        kind, command = self.services["kafka"]["healthcheck"]["test"]
        assert kind == "CMD-SHELL", kind
        command = command.replace("localhost:9092", self.bootstrap).replace("/opt/kafka/bin/", f"{self.tools_bin}/")
        self._wait(["bash", "-c", command], what="kafka")

    def _start_redis(self) -> None:
        self.redis_dir.mkdir(parents=True, exist_ok=True)
        self.redis_port = free_port()
        command = [*self.services["redis"]["command"], "--port", str(self.redis_port), "--bind", "127.0.0.1"]
        self._others.append(self._spawn("redis-0", command, env=self.base_env, cwd=self.redis_dir))
        # The redis service's healthcheck (`redis-cli ping`), at this server's port.
        program, *args = self.services["redis"]["healthcheck"]["test"][1:]
        self._wait([program, "-p", str(self.redis_port), *args], what="redis")

    def _run_kafka_init(self) -> None:
        init = self.services["kafka-init"]
        # `$$` is compose's escape for a literal `$`.
        script = init["command"][0].replace("$$", "$")
        script = self._container_addresses(script).replace("/opt/kafka/bin/", f"{self.tools_bin}/")
        done = subprocess.run(
            [*init["entrypoint"], script], env=self.base_env, capture_output=True, text=True, timeout=180
        )
        (self.work / "kafka-init.log").write_text(done.stdout + done.stderr)
        if done.returncode != 0:
            raise ComposeError(f"kafka-init failed ({done.returncode}):\n{done.stderr[-3000:]}")

    def _start_replica(self, service: str) -> None:
        env = {key: self._container_addresses(value) for key, value in self.environment(service).items()}
        ports = {}
        for setting in _PORT_SETTINGS:
            if setting in env:
                ports[env[setting]] = free_port()
                env[setting] = str(ports[env[setting]])
        for key in ("ROLLOUT_HTTP_HOST", "ROLLOUT_METRICS_HOST"):
            if key in env:
                env[key] = "127.0.0.1"  # 0.0.0.0 in a container is its own network; here, loopback
        index = len(self.replicas_of(service))
        process = self._spawn(f"{service}-{index}", self.services[service]["command"], env=self.base_env | env)
        self.replicas.append(_Replica(service, process, env, ports))

    def wait_healthy(self) -> None:
        for replica in self.replicas:
            test = self.services[replica.service]["healthcheck"]["test"]
            assert test[0] == "CMD", test
            argv = list(test[1:])
            for inside, outside in replica.ports.items():
                argv = [word.replace(f"127.0.0.1:{inside}/", f"127.0.0.1:{outside}/") for word in argv]
            self._wait(argv, what=f"{replica.service} (pid {replica.process.pid})", replica=replica)

    def _wait(self, argv: list[str], *, what: str, replica: _Replica | None = None) -> None:
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while True:
            if replica is not None and replica.process.poll() is not None:
                raise ComposeError(f"{what} exited with {replica.process.returncode}")
            try:
                # a healthcheck that is a JVM tool can take over 30 s to start on a loaded machine:
                # an attempt that runs long is "not healthy yet", like a failed one, until the deadline
                done = subprocess.run(argv, env=self.base_env, capture_output=True, timeout=_CHECK_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                done = subprocess.CompletedProcess(argv, -1, b"", f"no answer in {_CHECK_TIMEOUT_S:g} s".encode())
            if done.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise ComposeError(f"{what} not healthy after {_READY_TIMEOUT_S:g} s: {done.stderr[-500:]!r}")
            time.sleep(0.5)

    def _spawn(
        self, name: str, argv: list[str], *, env: dict[str, str], cwd: Path | None = None
    ) -> subprocess.Popen[bytes]:
        with (self.work / f"{name}.log").open("ab") as log:
            return subprocess.Popen(
                argv, env=env, cwd=cwd or self.work, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
