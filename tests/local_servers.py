"""A local broker, Redis or Prometheus for tests that need one of their own (a secured, TLS or restartable one).

A server that cannot start fails the tests that need it, with its log's reason: a skipped
integration test would read as a pass. Shared by every test folder (tests/ is on the path).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

import pytest

from rollout_devenv import DevenvError, KafkaBroker, KafkaCluster, PrometheusServer, RedisSentinelGroup, RedisServer

Server = TypeVar("Server", KafkaBroker, RedisServer, PrometheusServer, KafkaCluster, RedisSentinelGroup)


def started(server: Server, *, what: str) -> Server:
    """`server`, started; or, cleaned up, a failed test naming `what` and why."""
    try:
        server.start()
        return server
    except DevenvError as exc:
        error = exc
    # Failed outside the except block, so the report shows the cause alone, not a chain.
    server.stop(remove_data=True)
    pytest.fail(f"{what} could not be started for the tests:\n{error.full_text()}", pytrace=False)


@contextmanager
def running(server: Server, *, what: str) -> Iterator[Server]:
    """`started(server)` for the block; stopped, its data removed, after it."""
    started(server, what=what)
    try:
        yield server
    finally:
        server.stop(remove_data=True)


@contextmanager
def frozen(broker: KafkaBroker) -> Iterator[None]:
    """The broker's process stopped (SIGSTOP) for the block: connections stay open, nothing answers."""
    pid = broker._proc.pid  # type: ignore[union-attr]
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)
