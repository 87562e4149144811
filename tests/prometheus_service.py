"""A real Prometheus for the metric check tests (CHK-2), scraping an exporter of this test process.

The session's fixtures (the exporter, the server) are registered in the root conftest, so the
check tests and the end-to-end tests share one server; `series` is imported by the conftests of
the folders whose tests set gauges.

Where Prometheus comes from: `PROMETHEUS_URL` when set (that server must scrape
`127.0.0.1:$PROMETHEUS_EXPORTER_PORT` every second or so, where these tests serve their gauges),
else a local `prometheus` process started once per session. A Prometheus that cannot be had fails
the tests, never skips them.

Each test gets its own series (`rollout_check_test_value{case="<test>-<random>"}`), sets its value
and waits until Prometheus answers it, so tests never see each other's values.
"""

from __future__ import annotations

import json
import math
import os
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from local_servers import started
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from rollout_devenv import PrometheusServer, free_port
from rollout_devenv.prometheus import basic_auth_header

METRIC = "rollout_check_test_value"
# How long a set value may take to be scraped and answered: a few scrape intervals on a loaded machine.
VISIBLE_WITHIN_S = 30.0


@dataclass(frozen=True, slots=True)
class Exporter:
    port: int
    gauge: Gauge

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"


@dataclass(frozen=True, slots=True)
class PrometheusService:
    url: str
    origin: str
    # The process this session started itself; None when the server lives elsewhere.
    local: PrometheusServer | None = None


@pytest.fixture(scope="session")
def metrics_exporter() -> Iterator[Exporter]:
    """prometheus_client's own HTTP server on loopback, serving one gauge with a `case` label."""
    given = os.environ.get("PROMETHEUS_EXPORTER_PORT")
    if os.environ.get("PROMETHEUS_URL") and not given:
        pytest.fail(
            "PROMETHEUS_URL is set but PROMETHEUS_EXPORTER_PORT is not: that Prometheus must scrape "
            "127.0.0.1:$PROMETHEUS_EXPORTER_PORT, where these tests serve their gauges",
            pytrace=False,
        )
    registry = CollectorRegistry()
    gauge = Gauge(METRIC, "a value a metric check test sets", ["case"], registry=registry)
    port = int(given) if given else free_port()
    httpd, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    try:
        yield Exporter(port=port, gauge=gauge)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


@pytest.fixture(scope="session")
def _prometheus_service(metrics_exporter: Exporter) -> Iterator[PrometheusService]:
    if url := os.environ.get("PROMETHEUS_URL"):
        yield PrometheusService(url=url.rstrip("/"), origin="PROMETHEUS_URL")
        return
    server = started(PrometheusServer(scrape_targets=[metrics_exporter.target]), what="Prometheus (local prometheus)")
    try:
        yield PrometheusService(url=server.url, origin="local prometheus", local=server)
    finally:
        server.stop(remove_data=True)


@pytest.fixture(scope="session")
def prometheus_url(_prometheus_service: PrometheusService) -> str:
    """The base URL of a real Prometheus that scrapes `metrics_exporter`."""
    return _prometheus_service.url


@pytest.fixture
def prometheus_server(_prometheus_service: PrometheusService) -> Iterator[PrometheusServer]:
    """The session's local Prometheus, for tests that stop or freeze it; started again after them."""
    server = _prometheus_service.local
    if server is None:
        pytest.fail(
            "this test stops Prometheus, which needs the one this session starts itself, but it comes from "
            f"{_prometheus_service.origin}; unset PROMETHEUS_URL to run it",
            pytrace=False,
        )
    yield server
    server.start()


def instant_query(url: str, query: str, *, authorization: str | None = None) -> list[dict[str, Any]]:
    """The samples of an instant query, asked with urllib (the code under test uses aiohttp)."""
    request = urllib.request.Request(f"{url}/api/v1/query?{urllib.parse.urlencode({'query': query})}")
    if authorization is not None:
        request.add_header("Authorization", authorization)
    with urllib.request.urlopen(request, timeout=5.0) as answer:
        body = json.loads(answer.read())
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


@dataclass(frozen=True, slots=True)
class Series:
    """One test's series: `set` its value, then `await_visible` until Prometheus answers it."""

    exporter: Exporter
    case: str
    url: str

    @property
    def query(self) -> str:
        return f'{METRIC}{{case="{self.case}"}}'

    def set(self, value: float) -> None:
        self.exporter.gauge.labels(case=self.case).set(value)

    def remove(self) -> None:
        self.exporter.gauge.remove(self.case)

    def answered(self, *, authorization: str | None = None) -> float | None:
        samples = instant_query(self.url, self.query, authorization=authorization)
        return float(samples[0]["value"][1]) if samples else None

    def await_visible(self, value: float | None, *, url: str | None = None, authorization: str | None = None) -> None:
        """Wait until the query answers `value` (None: no sample, after `remove`); fail after
        VISIBLE_WITHIN_S with what it answered last."""
        asked = Series(self.exporter, self.case, url or self.url)
        deadline = time.monotonic() + VISIBLE_WITHIN_S
        last: float | None = None
        while time.monotonic() < deadline:
            last = asked.answered(authorization=authorization)
            if _same(last, value):
                return
            time.sleep(0.2)
        pytest.fail(f"{self.query} still answers {last} after {VISIBLE_WITHIN_S:.0f} s, not {value}", pytrace=False)


def _same(answered: float | None, wanted: float | None) -> bool:
    if answered is None or wanted is None:
        return answered is wanted
    return answered == wanted or (math.isnan(answered) and math.isnan(wanted))


@pytest.fixture
def series(request: pytest.FixtureRequest, metrics_exporter: Exporter, prometheus_url: str) -> Iterator[Series]:
    name = "".join(c if c.isalnum() else "-" for c in request.node.name)[:40]
    made = Series(metrics_exporter, f"{name}-{uuid.uuid4().hex[:8]}", prometheus_url)
    yield made
    if made.case in _cases(metrics_exporter):
        made.remove()


def _cases(exporter: Exporter) -> set[str]:
    return {sample.labels["case"] for metric in exporter.gauge.collect() for sample in metric.samples}


__all__ = [
    "METRIC",
    "Exporter",
    "PrometheusService",
    "Series",
    "basic_auth_header",
    "instant_query",
    "series",
]
