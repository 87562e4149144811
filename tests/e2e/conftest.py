"""End-to-end fixtures: a fresh topic prefix, and the services as processes, stopped afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import browser, page, screenshots
from prometheus_service import series
from service_processes import ServiceProcesses

__all__ = ["browser", "page", "screenshots", "series"]  # the dashboard test's browser fixtures, a check's gauge


@pytest.fixture
def prefix(topic_prefix: str) -> str:
    return topic_prefix + "."


@pytest.fixture
def services(tmp_path: Path, kafka_bootstrap: str, redis_url: str, prefix: str) -> Iterator[ServiceProcesses]:
    processes = ServiceProcesses(
        log_dir=tmp_path,
        base_env={
            "ROLLOUT_KAFKA_BOOTSTRAP": kafka_bootstrap,
            "ROLLOUT_REDIS_URL": redis_url,
            "ROLLOUT_TOPIC_PREFIX": prefix,
            "ROLLOUT_LOG_LEVEL": "INFO",
        },
    )
    try:
        yield processes
    finally:
        processes.stop_all()
