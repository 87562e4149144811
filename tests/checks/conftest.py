"""The metric check tests (CHK-2): the session's Prometheus comes from `prometheus_service` (through
the root conftest); here a second one that requires basic auth."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from local_servers import started
from prometheus_service import METRIC, Exporter, PrometheusService, Series, basic_auth_header, instant_query, series

from rollout_devenv import PrometheusServer


@pytest.fixture(scope="module")
def secured_prometheus(metrics_exporter: Exporter) -> Iterator[PrometheusServer]:
    """A second local Prometheus that requires basic auth (`--web.config.file`)."""
    server = started(
        PrometheusServer(scrape_targets=[metrics_exporter.target], basic_auth=("checker", "s3cret-pass")),
        what="Prometheus with basic auth (local prometheus)",
    )
    try:
        yield server
    finally:
        server.stop(remove_data=True)


__all__ = ["METRIC", "Exporter", "PrometheusService", "Series", "basic_auth_header", "instant_query", "series"]
