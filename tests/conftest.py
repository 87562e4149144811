"""Infrastructure fixtures: a real Kafka broker and a real Redis for the tests that ask for them.

Where each service comes from, first match wins:
1. `KAFKA_BOOTSTRAP` / `REDIS_URL` in the environment: a service someone already runs;
2. a Docker engine that answers: testcontainers;
3. otherwise processes on this machine, through `rollout_devenv` (Kafka jars via Maven, Debian's
   redis-server).

Each service starts once per session, and only when a test first asks for it. A service that
cannot be had fails the tests that need it: a skipped integration test would read as a pass.
Only infrastructure belongs here; test helpers go in conftest files of subfolders.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import re
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest
from local_servers import started

# Prometheus is infrastructure too (CHK-2): one server and exporter per session for every folder.
from prometheus_service import _prometheus_service, metrics_exporter, prometheus_server, prometheus_url  # noqa: F401

from rollout_devenv import DevenvError, KafkaBroker, KafkaCluster, RedisSentinelGroup, RedisServer


@dataclass(frozen=True, slots=True)
class _Service:
    address: str
    origin: str
    # The process this session started itself; None when the service lives elsewhere.
    local: Any = None


_KUBE_TESTS = Path(__file__).parent / "kube"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The Kubernetes tests run last, in their own order: on a machine without kube-apiserver
    `make test` builds it in the background, and every other test runs while it builds."""
    items.sort(key=lambda item: item.path.is_relative_to(_KUBE_TESTS))


_DEFAULT_DOCKER_SOCKET = Path("/var/run/docker.sock")


@functools.cache
def _docker_answers() -> bool:
    """True when a Docker engine answers a ping; asked once per session, for both services."""
    if "DOCKER_HOST" not in os.environ and not _DEFAULT_DOCKER_SOCKET.exists():
        return False
    # docker-py warns on import and leaks its socket when the engine is away; the suite turns
    # warnings into errors, so they are silenced here and the leak collected while they are.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            import docker

            client = docker.from_env(timeout=5)
            try:
                return bool(client.ping())
            finally:
                client.close()
        except Exception:
            return False
        finally:
            gc.collect()


def _fail(what: str, exc: Exception) -> NoReturn:
    text = exc.full_text() if isinstance(exc, DevenvError) else f"{type(exc).__name__}: {exc}"
    pytest.fail(f"{what} could not be started for the tests:\n{text}", pytrace=False)


def _start_container(container: Any, *, what: str) -> Any:
    try:
        container.start()
        return container
    except Exception as exc:
        error = exc
    with contextlib.suppress(Exception):
        container.stop()
    _fail(what, error)


def _kafka_container() -> Any:
    # The community module is the current home; the old path only warns and re-exports it.
    try:
        from testcontainers.community.kafka import KafkaContainer
    except ImportError:
        from testcontainers.kafka import KafkaContainer
    return KafkaContainer().with_kraft()


def _redis_container() -> Any:
    try:
        from testcontainers.community.redis import RedisContainer
    except ImportError:
        from testcontainers.redis import RedisContainer
    return RedisContainer()


@pytest.fixture(scope="session")
def _kafka_service() -> Iterator[_Service]:
    if address := os.environ.get("KAFKA_BOOTSTRAP"):
        yield _Service(address=address, origin="KAFKA_BOOTSTRAP")
        return
    if _docker_answers():
        container = _start_container(_kafka_container(), what="Kafka (testcontainers)")
        try:
            yield _Service(address=container.get_bootstrap_server(), origin="testcontainers")
        finally:
            container.stop()
        return
    broker = started(KafkaBroker(), what="Kafka (local broker)")
    try:
        yield _Service(address=broker.bootstrap, origin="local broker", local=broker)
    finally:
        broker.stop(remove_data=True)


@pytest.fixture(scope="session")
def _redis_service() -> Iterator[_Service]:
    if url := os.environ.get("REDIS_URL"):
        yield _Service(address=url, origin="REDIS_URL")
        return
    if _docker_answers():
        container = _start_container(_redis_container(), what="Redis (testcontainers)")
        try:
            host, port = container.get_container_host_ip(), container.get_exposed_port(6379)
            yield _Service(address=f"redis://{host}:{port}/0", origin="testcontainers")
        finally:
            container.stop()
        return
    server = started(RedisServer(), what="Redis (local redis-server)")
    try:
        yield _Service(address=server.url, origin="local redis-server", local=server)
    finally:
        server.stop(remove_data=True)


@pytest.fixture(scope="session")
def kafka_bootstrap(_kafka_service: _Service) -> str:
    """`host:port` of a real Kafka broker, for `bootstrap_servers`."""
    return _kafka_service.address


@pytest.fixture(scope="session")
def redis_url(_redis_service: _Service) -> str:
    """`redis://host:port/0` of a real Redis server."""
    return _redis_service.address


def _local_or_fail(service: _Service, *, name: str, env_var: str) -> Any:
    if service.local is None:
        pytest.fail(
            f"this test stops and restarts {name}, which needs the {name} this session starts itself, "
            f"but it comes from {service.origin}; unset {env_var} and run without Docker to run it",
            pytrace=False,
        )
    return service.local


@pytest.fixture
def kafka_broker(_kafka_service: _Service) -> Iterator[KafkaBroker]:
    """The session's local `KafkaBroker`, for fault-injection tests that stop or restart it.

    It is the same broker every other test uses: a test that leaves it stopped gets it started
    again here, so the tests after it are not affected.
    """
    broker: KafkaBroker = _local_or_fail(_kafka_service, name="Kafka", env_var="KAFKA_BOOTSTRAP")
    yield broker
    broker.start()


@pytest.fixture
def redis_server(_redis_service: _Service) -> Iterator[RedisServer]:
    """The session's local `RedisServer`, for tests that stop or restart it (see `kafka_broker`)."""
    server: RedisServer = _local_or_fail(_redis_service, name="Redis", env_var="REDIS_URL")
    yield server
    server.start()


@pytest.fixture(scope="session")
def _kafka_cluster() -> Iterator[KafkaCluster]:
    cluster = started(KafkaCluster(), what="the three-node Kafka cluster")
    try:
        yield cluster
    finally:
        cluster.stop(remove_data=True)


@pytest.fixture
def kafka_cluster(_kafka_cluster: KafkaCluster) -> Iterator[KafkaCluster]:
    """A local three-node KRaft cluster (replication 3, min in-sync 2 for its internal topics),
    started once per session when a test first asks for it; a test may kill, pause and restart its
    nodes, and gets every node running again after it. Always local: the test needs its processes."""
    yield _kafka_cluster
    _kafka_cluster.recover()


@pytest.fixture(scope="session")
def _redis_sentinel() -> Iterator[RedisSentinelGroup]:
    group = started(RedisSentinelGroup(), what="Redis with a replica and three Sentinels")
    try:
        yield group
    finally:
        group.stop(remove_data=True)


@pytest.fixture
def redis_sentinel(_redis_sentinel: RedisSentinelGroup) -> Iterator[RedisSentinelGroup]:
    """A local Redis primary, its replica and three Sentinels (service `rollout`), started once per
    session when a test first asks; a test may kill the primary or pause the replica, and gets
    every server back (killed ones as replicas of the primary then) and in sync after it."""
    yield _redis_sentinel
    _redis_sentinel.recover()


def _slug(text: str, *, limit: int = 40) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].rstrip("-") or "test"


@pytest.fixture
def topic_prefix(request: pytest.FixtureRequest) -> str:
    """A prefix no other test (nor an earlier run against the same broker) uses, such as
    `t-test-round-trip-1a2b3c4d`; use it for topic, group and key names."""
    return f"t-{_slug(request.node.name)}-{uuid.uuid4().hex[:8]}"
