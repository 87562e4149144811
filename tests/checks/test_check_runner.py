"""CHK-2 in production: the health service's check runner on the real broker, Redis and Prometheus.

The planner's part is played by this test: it stores the sequence where `rollout apply` does and
publishes `check_series` events on the progress topic; the runner must evaluate each running series
against the real Prometheus and publish one `check_result` per evaluation on
`rollout.check-results` (a CloudEvent keyed by rollout id), and an unreachable Prometheus must be an
`inconclusive` result, never a stopped runner.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from conftest import Series
from topic_reader import Message, read_topic

from rollout_adapters.connections import kafka_bus, redis_store
from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.redis_store import RedisStore
from rollout_common.commands import CheckSeries
from rollout_common.envelope import encode
from rollout_common.sequence import Sequence
from rollout_common.topics.catalog import CHECK_RESULTS, PROGRESS
from rollout_devenv import free_port
from rollout_health.checks import PrometheusQuery, SeriesKey
from rollout_health.checks.runner import SEQUENCE_KEY, CheckRunner
from rollout_health.metrics import HealthMetrics
from rollout_health.settings import CheckRunnerSettings

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

WAIT_S = 45.0


def sequence(query: str, *, prometheus_url: str | None = None) -> Sequence:
    stage: dict[str, Any] = {
        "name": "prod",
        "clusterSelector": {"matchLabels": {"env": "prod"}},
        "checks": [
            {"name": "errors", "query": query, "successCondition": "result < 0.01", "interval": 1},
        ],
    }
    body: dict[str, Any] = {"name": "main", "stages": [stage]}
    if prometheus_url is not None:
        body["prometheusUrl"] = prometheus_url
    return Sequence.model_validate(body)


class Harness:
    def __init__(
        self,
        *,
        settings: CheckRunnerSettings,
        bus: KafkaBus,
        store: RedisStore,
        runner: CheckRunner,
        metrics: HealthMetrics,
    ) -> None:
        self.settings = settings
        self.bus = bus
        self.store = store
        self.runner = runner
        self.metrics = metrics

    async def store_sequence(self, value: Sequence) -> None:
        await self.store.put(SEQUENCE_KEY, value.model_dump_json(by_alias=True).encode())

    async def announce(self, *, running: bool, since: float, interval: float = 1.0, check: str = "errors") -> None:
        """As the planner does: a series of the check for rollout main-1 at prod started or ended."""
        event = CheckSeries(
            rollout_id="main-1", stage="prod", check=check, running=running, since=since, interval=interval
        )
        value, headers = encode(event, event_id=f"series-{since}-{running}", source="rollout-planner", at=since)
        topic = self.settings.topic_prefix + PROGRESS.name
        await self.bus.publish(topic, key=PROGRESS.key(event).encode(), value=value, headers=headers)

    async def results_until(self, done: Callable[[list[dict[str, Any]]], bool]) -> list[Message]:
        def bodies_done(records: list[Message]) -> bool:
            return done([json.loads(r.value) for r in records])

        return await read_topic(
            self.settings.kafka_bootstrap,
            self.settings.topic_prefix + CHECK_RESULTS.name,
            until=bodies_done,
            timeout_s=WAIT_S,
        )


@pytest.fixture
async def harness(kafka_bootstrap: str, redis_url: str, topic_prefix: str) -> AsyncIterator[Harness]:
    settings = CheckRunnerSettings(
        kafka_bootstrap=kafka_bootstrap,
        topic_prefix=topic_prefix + ".",
        redis_url=redis_url,
        redis_namespace=topic_prefix,
        checks={"prometheus_url": "http://127.0.0.1:1", "timeout_s": 2.0},
        idle_poll_s=0.2,
    )
    bus = kafka_bus(settings, client_id="check-runner-test")
    store = redis_store(settings)
    await bus.ensure_topics([settings.topic_spec(PROGRESS), settings.topic_spec(CHECK_RESULTS)])
    metrics = HealthMetrics()
    stop = asyncio.Event()
    async with PrometheusQuery(settings.checks) as query:
        runner = CheckRunner(bus=bus, store=store, query=query, settings=settings, metrics=metrics)
        made = Harness(settings=settings, bus=bus, store=store, runner=runner, metrics=metrics)
        task = asyncio.create_task(runner.run(stop))
        try:
            yield made
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)
            await store.close()
            await bus.close()


def _outcomes(bodies: list[dict[str, Any]]) -> list[str]:
    return [body["outcome"] for body in bodies]


async def test_chk2_the_runner_evaluates_a_running_series_each_interval_and_publishes_each_result(
    harness: Harness, series: Series
) -> None:
    """A series announced at `since` is evaluated at once, then every interval; each result is a
    CloudEvent keyed by rollout id; a value that goes bad fails; the series' end stops it."""
    series.set(0.002)
    series.await_visible(0.002)
    await harness.store_sequence(sequence(series.query, prometheus_url=series.url))
    since = time.time()
    await harness.announce(running=True, since=since)

    records = await harness.results_until(lambda bodies: len(bodies) >= 2)
    first, second = (json.loads(r.value) for r in records[:2])
    assert {k: v for k, v in first.items() if k != "observedAt"} == {
        "kind": "check_result",
        "rolloutId": "main-1",
        "stage": "prod",
        "check": "errors",
        "value": 0.002,
        "outcome": "passed",
        "reason": "0.002: successCondition result < 0.01 holds",
    }
    assert since <= first["observedAt"] < since + 1.0  # evaluated at once
    assert second["observedAt"] >= since + 1.0  # then on the grid: since + 1 s
    headers = dict(records[0].headers)
    assert headers["ce_type"] == b"io.rollout.check_result.v1"
    assert headers["ce_source"] == b"rollout-health/checks"
    assert records[0].key == b"main-1"

    series.set(0.2)
    series.await_visible(0.2)
    records = await harness.results_until(lambda bodies: "failed" in _outcomes(bodies))
    failed = next(json.loads(r.value) for r in records if json.loads(r.value)["outcome"] == "failed")
    assert (failed["value"], failed["reason"]) == (0.2, "0.2: successCondition result < 0.01 does not hold")

    await harness.announce(running=False, since=since)
    async with asyncio.timeout(WAIT_S):
        while True:
            if not harness.runner.running:
                break  # it read the end: nothing more is due
            await asyncio.sleep(0.05)
    assert harness.runner.running == {}
    # Read once the series ended: the runner evaluates in the task that reads the end, so these are final.
    registry = harness.metrics.registry
    passed = registry.get_sample_value("rollout_health_check_evaluations_total", {"outcome": "passed"}) or 0
    failed = registry.get_sample_value("rollout_health_check_evaluations_total", {"outcome": "failed"}) or 0
    assert passed >= 2 and failed >= 1
    # every evaluation's latency observed once
    assert registry.get_sample_value("rollout_health_check_evaluation_seconds_count") == passed + failed


async def test_chk2_an_unreachable_prometheus_is_inconclusive_and_the_runner_goes_on(
    harness: Harness, series: Series
) -> None:
    """No sequence prometheusUrl: the settings' default, a port nobody listens on. Every evaluation is
    `inconclusive` with the reason, the runner keeps evaluating; a sequence pointing at the real
    Prometheus (read again each round) passes again."""
    closed = f"http://127.0.0.1:{free_port()}"
    series.set(0.001)
    series.await_visible(0.001)
    await harness.store_sequence(sequence(series.query, prometheus_url=closed))
    await harness.announce(running=True, since=time.time())

    records = await harness.results_until(lambda bodies: _outcomes(bodies).count("inconclusive") >= 2)
    inconclusive = [json.loads(r.value) for r in records]
    assert {(body["outcome"], body["value"]) for body in inconclusive} == {("inconclusive", None)}
    assert all(body["reason"].startswith(f"{closed} unreachable: ClientConnectorError: ") for body in inconclusive)

    await harness.store_sequence(sequence(series.query, prometheus_url=series.url))
    records = await harness.results_until(lambda bodies: "passed" in _outcomes(bodies))
    assert json.loads(records[-1].value)["reason"] == "0.001: successCondition result < 0.01 holds"
    assert SeriesKey("main-1", "prod", "errors") in harness.runner.running


async def test_chk2_a_check_missing_from_the_stored_sequence_is_inconclusive_with_why(harness: Harness) -> None:
    await harness.announce(running=True, since=time.time(), check="latency")
    records = await harness.results_until(lambda bodies: len(bodies) >= 1)
    body = json.loads(records[0].value)
    assert (body["check"], body["outcome"], body["reason"]) == (
        "latency",
        "inconclusive",
        f"no sequence is stored under 'sequence' in Redis namespace {harness.settings.redis_namespace!r}",
    )
    await harness.store_sequence(sequence("up"))
    # Another "no sequence" result may come out before the runner reads the stored one (it evaluates
    # on its interval's grid): wait for the first result that names the missing check.
    missing = "the sequence 'main' has no check 'latency' at stage 'prod'"
    records = await harness.results_until(lambda bodies: any(b["reason"] == missing for b in bodies))
    found = next(b for b in map(lambda r: json.loads(r.value), records) if b["reason"] == missing)
    assert (found["check"], found["outcome"]) == ("latency", "inconclusive")
