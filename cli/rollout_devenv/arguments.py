"""The command line of `python -m rollout_devenv`: one sub-command per service, each with its actions."""

from __future__ import annotations

import argparse
from pathlib import Path

from rollout_devenv.prometheus import DEFAULT_SCRAPE_INTERVAL_S

_Services = argparse._SubParsersAction  # type: ignore[type-arg]


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="python -m rollout_devenv",
        description="Run a real Kafka broker or Redis server locally, without Docker.",
    )
    services = root.add_subparsers(dest="service", required=True)
    _kafka_parser(services)
    _kafka_cluster_parser(services)
    _sentinel_parser(services)
    _redis_parser(services)
    _prometheus_parser(services)
    _kube_parser(services)
    _helm_parser(services)
    return root


def _kafka_parser(services: _Services) -> None:
    kafka = services.add_parser("kafka", help="single-node Apache Kafka (KRaft)")
    kafka_actions = kafka.add_subparsers(dest="action", required=True)
    kafka_actions.add_parser("fetch", help="fetch the broker's jars (once per machine) and print their folder")
    kafka_run = kafka_actions.add_parser("run", help="start a broker, print KAFKA_BOOTSTRAP=..., stop on Ctrl-C")
    kafka_run.add_argument(
        "--data-dir",
        type=Path,
        help="keep the broker's data (and its port) here across runs; default: a temp dir, deleted on stop",
    )


def _kafka_cluster_parser(services: _Services) -> None:
    cluster = services.add_parser("kafka-cluster", help="three-node Apache Kafka cluster (KRaft, quorum of three)")
    cluster_actions = cluster.add_subparsers(dest="action", required=True)
    cluster_run = cluster_actions.add_parser(
        "run", help="start three nodes, print KAFKA_BOOTSTRAP=... (all three), stop on Ctrl-C"
    )
    cluster_run.add_argument(
        "--data-dir", type=Path, help="keep the nodes' data (and ports) here across runs; default: a temp dir"
    )


def _sentinel_parser(services: _Services) -> None:
    sentinel = services.add_parser("redis-sentinel", help="Redis primary, one replica and three Sentinels")
    sentinel_actions = sentinel.add_subparsers(dest="action", required=True)
    sentinel_actions.add_parser(
        "run", help="start them, print ROLLOUT_REDIS_SENTINELS=... and the service name, stop on Ctrl-C"
    )


def _redis_parser(services: _Services) -> None:
    redis = services.add_parser("redis", help="Debian's redis-server")
    redis_actions = redis.add_subparsers(dest="action", required=True)
    redis_run = redis_actions.add_parser("run", help="start a server, print REDIS_URL=..., stop on Ctrl-C")
    redis_run.add_argument(
        "--data-dir",
        type=Path,
        help="keep the server's files (and its port) here across runs, with an append-only file as in "
        "production; default: a temp dir, deleted on stop",
    )
    redis_run.add_argument("--aof", action="store_true", help="append-only file, fsync always (on with --data-dir)")
    redis_run.add_argument("--port", type=int, help="listen here (default: the data dir's last port, or a free one)")


def _kube_parser(services: _Services) -> None:
    kube = services.add_parser("kube", help="upstream kube-apiserver on Debian's etcd")
    kube_actions = kube.add_subparsers(dest="action", required=True)
    kube_build = kube_actions.add_parser(
        "build", help="build kube-apiserver with Go (once per machine) and print its path"
    )
    kube_build.add_argument(
        "--background",
        action="store_true",
        help="start the build in a detached process and return at once (make test; the tests wait for it)",
    )
    kube_run = kube_actions.add_parser(
        "run", help="start etcd and apiservers with the Cluster API and Fleet CRDs, print KUBECONFIG=..."
    )
    kube_run.add_argument("--apiservers", type=int, default=1, help="how many apiservers (the first has the CRDs)")


def _helm_parser(services: _Services) -> None:
    helm_parser = services.add_parser("helm", help="the helm command, built from the Go module proxy")
    helm_actions = helm_parser.add_subparsers(dest="action", required=True)
    helm_build = helm_actions.add_parser("build", help="build helm with Go (once per machine) and print its path")
    helm_build.add_argument(
        "--background",
        action="store_true",
        help="start the build in a detached process and return at once (make test; the chart's tests wait for it)",
    )


def _prometheus_parser(services: _Services) -> None:
    prometheus = services.add_parser("prometheus", help="Debian's prometheus, for the metric checks (CHK-2)")
    actions = prometheus.add_subparsers(dest="action", required=True)
    run = actions.add_parser("run", help="start a server, print PROMETHEUS_URL=..., stop on Ctrl-C")
    run.add_argument(
        "--data-dir",
        type=Path,
        help="keep the server's TSDB (and its port) here across runs; default: a temp dir, deleted on stop",
    )
    run.add_argument("--port", type=int, help="listen here (default: the data dir's last port, or a free one)")
    run.add_argument(
        "--scrape",
        action="append",
        default=[],
        metavar="HOST:PORT",
        help="an exporter to scrape, e.g. --scrape 127.0.0.1:8000 (repeatable)",
    )
    run.add_argument(
        "--scrape-interval",
        type=float,
        default=DEFAULT_SCRAPE_INTERVAL_S,
        metavar="SECONDS",
        help=f"how often the targets are scraped (default {DEFAULT_SCRAPE_INTERVAL_S:g})",
    )
