"""`python -m rollout_devenv`: fetch Kafka's jars or build kube-apiserver, or run Kafka (one broker
or a three-node cluster), Redis (alone or with a replica and Sentinels), Prometheus or Kubernetes
API servers until Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

from rollout_devenv import arguments, helm
from rollout_devenv._proc import DevenvError
from rollout_devenv._server import LocalServer
from rollout_devenv.kafka import KafkaBroker, fetch_kafka_jars
from rollout_devenv.kafka_cluster import KafkaCluster
from rollout_devenv.kube import KubeStack, build_kube_apiserver, start_background_build
from rollout_devenv.prometheus import PrometheusServer
from rollout_devenv.redis import RedisServer
from rollout_devenv.redis_sentinel import RedisSentinelGroup

_PORT_FILE = "rollout-port"


class _Server(Protocol):
    log_path: Path
    data_dir: Path

    @property
    def running(self) -> bool: ...

    def start(self) -> None: ...

    def stop(self, *, remove_data: bool = False) -> None: ...


def _serve(server: _Server, *, announce: Callable[[], str], kept: bool) -> int:
    """Start `server`, print `announce()` on stdout, and stop it on Ctrl-C or SIGTERM."""
    stop_requested = threading.Event()
    ready = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        # Until the server is ready, unwind like Ctrl-C so `start` cleans up what it began;
        # after that, leave the wait loop below and stop in order.
        if not ready.is_set():
            raise KeyboardInterrupt
        stop_requested.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    # This command is the server's only keeper: killed outright (SIGKILL, the OOM killer, a test
    # run's hard stop), it can stop nothing, so the kernel stops the server instead.
    for process in _processes(server):
        process.die_with_parent = True
    try:
        server.start()
        ready.set()
        print(announce(), flush=True)
        print(f"log: {server.log_path}; Ctrl-C to stop", file=sys.stderr, flush=True)
        print(_data_note(server.data_dir, kept=kept), file=sys.stderr, flush=True)
        while not stop_requested.wait(timeout=1.0):
            if not server.running:
                raise DevenvError(f"the server exited on its own; see {server.log_path}")
    finally:
        if server.running:
            print("stopping...", file=sys.stderr, flush=True)
        server.stop(remove_data=True)
    return 0


def _processes(server: _Server) -> list[LocalServer[Any]]:
    """The processes a served server starts: itself, or the members of a cluster, group or stack."""
    if isinstance(server, LocalServer):
        return [server]
    if isinstance(server, KafkaCluster):
        return list(server.nodes)
    if isinstance(server, RedisSentinelGroup):
        return [*server.servers, *server.sentinel_servers]
    if isinstance(server, KubeStack):
        return [server.etcd, *server.apiservers]
    raise TypeError(f"no processes known for {type(server).__name__}")


def _data_note(data_dir: Path, *, kept: bool) -> str:
    if kept:
        return f"data: {data_dir}, kept when it stops; the same --data-dir starts it again with that data and port"
    return f"data: {data_dir}, deleted when it stops; keep it with --data-dir DIR (make ... DATA=DIR)"


def _kafka_run(data_dir: Path | None) -> int:
    broker = KafkaBroker(data_dir=data_dir)

    def announce() -> str:
        print(f"Kafka {broker.version} ready in {broker.last_start_s or 0:.1f} s", file=sys.stderr)
        return f"KAFKA_BOOTSTRAP={broker.bootstrap}"

    return _serve(broker, announce=announce, kept=data_dir is not None)


def _redis_run(data_dir: Path | None, *, aof: bool, port: int | None) -> int:
    remembered = data_dir / _PORT_FILE if data_dir is not None else None
    if port is None and remembered is not None and remembered.is_file():
        port = int(remembered.read_text().strip())  # clients keep their REDIS_URL across a restart
    # A kept data dir is for restarts under a running system: every write fsynced, as in production.
    server = RedisServer(data_dir=data_dir, aof=aof or data_dir is not None, port=port)

    def announce() -> str:
        if remembered is not None:
            remembered.write_text(f"{server.port}\n")
        return f"REDIS_URL={server.url}"

    return _serve(server, announce=announce, kept=data_dir is not None)


def _remembered_port(data_dir: Path | None, port: int | None) -> tuple[Path | None, int | None]:
    """The port file of a kept data dir, and the port to use: the given one, else the one kept there."""
    remembered = data_dir / _PORT_FILE if data_dir is not None else None
    if port is None and remembered is not None and remembered.is_file():
        port = int(remembered.read_text().strip())  # clients keep their address across a restart
    return remembered, port


def _prometheus_run(args: argparse.Namespace) -> int:
    remembered, port = _remembered_port(args.data_dir, args.port)
    server = PrometheusServer(
        data_dir=args.data_dir, port=port, scrape_targets=args.scrape, scrape_interval_s=args.scrape_interval
    )

    def announce() -> str:
        if remembered is not None:
            remembered.write_text(f"{server.port}\n")
        return f"PROMETHEUS_URL={server.url}"

    return _serve(server, announce=announce, kept=args.data_dir is not None)


def _cluster_run(data_dir: Path | None) -> int:
    cluster = KafkaCluster(data_dir=data_dir)

    def announce() -> str:
        print(f"three Kafka nodes ready in {cluster.last_start_s or 0:.1f} s", file=sys.stderr)
        return f"KAFKA_BOOTSTRAP={cluster.bootstrap}"

    return _serve(cluster, announce=announce, kept=data_dir is not None)


def _sentinel_run() -> int:
    group = RedisSentinelGroup()

    def announce() -> str:
        sentinels = ",".join(group.sentinels)
        return f"ROLLOUT_REDIS_SENTINELS={sentinels}\nROLLOUT_REDIS_SENTINEL_SERVICE={group.service}"

    return _serve(group, announce=announce, kept=False)


def _kube_run(count: int) -> int:
    stack = KubeStack(count=count)

    def announce() -> str:
        starts = ", ".join(f"{s.last_start_s or 0:.1f} s" for s in stack.apiservers)
        print(f"kube-apiserver ready in {starts}; CRDs in {stack.crd_install_s or 0:.1f} s", file=sys.stderr)
        return "\n".join(f"KUBECONFIG={server.kubeconfig}" for server in stack.apiservers)

    return _serve(stack, announce=announce, kept=False)


def _dispatch(args: argparse.Namespace) -> int:
    if args.service == "kafka" and args.action == "fetch":
        print(fetch_kafka_jars())
        return 0
    if args.service == "kafka":
        return _kafka_run(args.data_dir)
    if args.service == "kafka-cluster":
        return _cluster_run(args.data_dir)
    if args.service == "redis-sentinel":
        return _sentinel_run()
    if args.service == "kube" and args.action == "build":
        print(start_background_build() if args.background else build_kube_apiserver())
        return 0
    if args.service == "kube":
        return _kube_run(args.apiservers)
    if args.service == "prometheus":
        return _prometheus_run(args)
    if args.service == "helm":
        print(helm.start_background_build() if args.background else helm.build_helm())
        return 0
    return _redis_run(args.data_dir, aof=args.aof, port=args.port)


def main(argv: Sequence[str] | None = None) -> int:
    args = arguments.parser().parse_args(argv)
    try:
        return _dispatch(args)
    except DevenvError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
