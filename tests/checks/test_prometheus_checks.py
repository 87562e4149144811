"""CHK-2 in production: the health service evaluates one check against a real Prometheus (Debian's
`prometheus`, scraping this test's exporter every second): passed, failed, and inconclusive for no
sample, NaN, a query error, a range vector, a stopped server, a hanging server and refused
credentials, each with its reason, never an exception; bounded in time."""

from __future__ import annotations

import math
import time

import pytest
from conftest import Series
from pydantic import SecretStr

from rollout_common.check_results import CheckOutcome, CheckResult
from rollout_common.checks import Check
from rollout_devenv import PrometheusServer
from rollout_devenv.prometheus import basic_auth_header
from rollout_health.checks import PrometheusQuery, evaluate_check
from rollout_health.settings import ChecksSettings

AT = 1_790_000_000.0


def _check(query: str, success: str = "result < 0.01", failure: str | None = None) -> Check:
    return Check(name="error-rate", query=query, success_condition=success, failure_condition=failure, interval=5)


async def _evaluate(check: Check, url: str, settings: ChecksSettings | None = None) -> CheckResult:
    async with PrometheusQuery(settings or ChecksSettings(timeout_s=5)) as source:
        return await evaluate_check(source, check, rollout_id="r-1", stage="prod", base_url=url, clock=lambda: AT)


def _seen(result: CheckResult) -> tuple[CheckOutcome, float | None, str]:
    assert (result.rollout_id, result.stage, result.check, result.observed_at) == ("r-1", "prod", "error-rate", AT)
    return result.outcome, result.value, result.reason


async def test_chk2_a_value_inside_the_success_condition_passes(series: Series) -> None:
    series.set(0.002)
    series.await_visible(0.002)
    assert _seen(await _evaluate(_check(series.query), series.url)) == (
        CheckOutcome.PASSED,
        0.002,
        "0.002: successCondition result < 0.01 holds",
    )


async def test_chk2_a_value_outside_the_success_condition_fails(series: Series) -> None:
    series.set(0.05)
    series.await_visible(0.05)
    assert _seen(await _evaluate(_check(series.query), series.url)) == (
        CheckOutcome.FAILED,
        0.05,
        "0.05: successCondition result < 0.01 does not hold",
    )


async def test_chk2_a_true_failure_condition_fails_even_when_success_holds(series: Series) -> None:
    series.set(0.7)
    series.await_visible(0.7)
    check = _check(series.query, success="result < 1", failure="result > 0.5 || result < 0")
    assert _seen(await _evaluate(check, series.url)) == (
        CheckOutcome.FAILED,
        0.7,
        "0.7: failureCondition result > 0.5 || result < 0 holds",
    )


async def test_chk2_the_first_sample_counts_and_a_scalar_is_a_value(series: Series) -> None:
    series.set(3)
    series.await_visible(3)
    # `count(...)` is a one-sample vector, `scalar(...)` a scalar: both judged by their value.
    check = _check(f"count({series.query}) + 1", success="result == 2")
    assert _seen(await _evaluate(check, series.url))[:2] == (CheckOutcome.PASSED, 2.0)
    check = _check(f"scalar({series.query})", success="result >= 3 && result <= 3")
    assert _seen(await _evaluate(check, series.url))[:2] == (CheckOutcome.PASSED, 3.0)


async def test_chk2_no_sample_is_inconclusive(series: Series) -> None:
    # The series was never set: Prometheus answers an empty vector.
    assert _seen(await _evaluate(_check(series.query), series.url)) == (
        CheckOutcome.INCONCLUSIVE,
        None,
        "the query returned no sample",
    )


async def test_chk2_nan_is_inconclusive(series: Series) -> None:
    series.set(math.nan)
    series.await_visible(math.nan)
    assert _seen(await _evaluate(_check(series.query), series.url)) == (
        CheckOutcome.INCONCLUSIVE,
        None,
        "the query returned nan, not a finite number",
    )


async def test_chk2_a_query_error_is_inconclusive_with_prometheus_reason(prometheus_url: str) -> None:
    outcome, value, reason = _seen(await _evaluate(_check("sum(rate(http_errors_total[5m])"), prometheus_url))
    assert (outcome, value) == (CheckOutcome.INCONCLUSIVE, None)
    assert reason.startswith("query error (HTTP 400, bad_data): ") and "parse error" in reason, reason


async def test_chk2_a_range_vector_is_inconclusive(series: Series) -> None:
    series.set(1)
    series.await_visible(1)
    assert _seen(await _evaluate(_check(f"{series.query}[1m]"), series.url)) == (
        CheckOutcome.INCONCLUSIVE,
        None,
        "the query returns a matrix, not an instant vector or a scalar",
    )


async def test_chk2_prometheus_stopped_is_inconclusive_then_answers_again(
    series: Series, prometheus_server: PrometheusServer
) -> None:
    series.set(0.001)
    series.await_visible(0.001)
    prometheus_server.stop()
    outcome, value, reason = _seen(await _evaluate(_check(series.query), series.url))
    assert (outcome, value) == (CheckOutcome.INCONCLUSIVE, None)
    assert reason.startswith(f"{series.url} unreachable: ClientConnectorError: "), reason
    prometheus_server.start()
    series.await_visible(0.001)
    assert _seen(await _evaluate(_check(series.query), series.url))[0] is CheckOutcome.PASSED


async def test_chk2_a_hanging_prometheus_is_inconclusive_within_the_timeout(
    series: Series, prometheus_server: PrometheusServer
) -> None:
    """The process is frozen (SIGSTOP): the kernel takes the connection, nothing answers."""
    series.set(0.001)
    series.await_visible(0.001)
    prometheus_server.freeze()
    try:
        started = time.monotonic()
        result = await _evaluate(_check(series.query), series.url, ChecksSettings(timeout_s=1))
        took = time.monotonic() - started
    finally:
        prometheus_server.thaw()
    assert _seen(result) == (CheckOutcome.INCONCLUSIVE, None, f"no answer from {series.url} within 1 s")
    # One second of timeout, plus what a loaded machine adds around it; never the minutes of no bound.
    assert 1.0 <= took < 5.0, took


@pytest.mark.parametrize(
    ("user", "password", "outcome", "reason"),
    [
        ("checker", "s3cret-pass", CheckOutcome.PASSED, "0.004: successCondition result < 0.01 holds"),
        ("checker", "wrong", CheckOutcome.INCONCLUSIVE, "HTTP 401, not a Prometheus answer: 'Unauthorized'"),
        (None, None, CheckOutcome.INCONCLUSIVE, "HTTP 401, not a Prometheus answer: 'Unauthorized'"),
    ],
)
async def test_chk2_basic_auth_from_settings(
    series: Series,
    secured_prometheus: PrometheusServer,
    user: str | None,
    password: str | None,
    outcome: CheckOutcome,
    reason: str,
) -> None:
    series.set(0.004)
    series.await_visible(0.004, url=secured_prometheus.url, authorization=basic_auth_header("checker", "s3cret-pass"))
    settings = ChecksSettings(
        timeout_s=5,
        basic_auth_username=user,
        basic_auth_password=None if password is None else SecretStr(password),
    )
    result = await _evaluate(_check(series.query), secured_prometheus.url, settings)
    assert _seen(result) == (outcome, 0.004 if outcome is CheckOutcome.PASSED else None, reason)
